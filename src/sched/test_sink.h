#pragma once
// A GenerationSink for tests: records everything, lets a test wait for the end.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "api/backend.h"

namespace agentkv::sched::testing {

class RecordingSink : public api::GenerationSink {
 public:
  using Clock = std::chrono::steady_clock;
  void OnStart() override {
    std::lock_guard<std::mutex> l(mu_);
    started_at_ = Clock::now();
  }

  void OnDelta(std::string_view text) override {
    std::lock_guard<std::mutex> l(mu_);
    text_ += text;
    ++n_deltas_;
    delta_times_.push_back(Clock::now());
    cv_.notify_all();
  }
  void OnLogprob(const api::TokenLogprob& logprob) override {
    std::lock_guard<std::mutex> l(mu_);
    logprobs_.push_back(logprob);
  }
  std::vector<api::TokenLogprob> logprobs() {
    std::lock_guard<std::mutex> l(mu_);
    return logprobs_;
  }
  void OnToolCallDelta(const api::ToolCallDelta& delta) override {
    std::lock_guard<std::mutex> l(mu_);
    if (delta.index >= tool_calls_.size()) tool_calls_.resize(delta.index + 1);
    api::ToolCall& call = tool_calls_[delta.index];
    if (!delta.id.empty()) call.id = delta.id;
    if (!delta.name.empty()) call.name = delta.name;
    call.arguments += delta.arguments;
  }
  std::vector<api::ToolCall> tool_calls() {
    std::lock_guard<std::mutex> l(mu_);
    return tool_calls_;
  }
  void OnFinish(api::FinishReason reason, const api::Usage& usage) override {
    std::lock_guard<std::mutex> l(mu_);
    reason_ = reason;
    usage_ = usage;
    done_ = true;
    done_at_ = Clock::now();
    cv_.notify_all();
  }
  void OnError(const Status& status) override {
    std::lock_guard<std::mutex> l(mu_);
    error_ = status;
    done_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_; });
  }
  // False if the request has not ended within `timeout`.
  template <typename Duration>
  bool WaitFor(Duration timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return done_; });
  }
  bool done() {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }
  void WaitForDeltas(int n) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_ || n_deltas_ >= n; });
  }
  std::string text() {
    std::lock_guard<std::mutex> l(mu_);
    return text_;
  }
  api::Usage usage() {
    std::lock_guard<std::mutex> l(mu_);
    return usage_;
  }
  api::FinishReason reason() {
    std::lock_guard<std::mutex> l(mu_);
    return reason_;
  }
  Status error() {
    std::lock_guard<std::mutex> l(mu_);
    return error_;
  }
  // When events reached the sink (the scheduler calls every sink from its one
  // inference thread, so times of different sinks are ordered like the events).
  // first_delta_at() is Clock::time_point::max() before the first delta.
  Clock::time_point first_delta_at() {
    std::lock_guard<std::mutex> l(mu_);
    return delta_times_.empty() ? Clock::time_point::max() : delta_times_.front();
  }
  // When the request was admitted (OnStart); time_point::max() before.
  Clock::time_point started_at() {
    std::lock_guard<std::mutex> l(mu_);
    return started_at_;
  }
  Clock::time_point done_at() {
    std::lock_guard<std::mutex> l(mu_);
    return done_ ? done_at_ : Clock::time_point::max();
  }
  // When each delta arrived, in order.
  std::vector<Clock::time_point> delta_times() {
    std::lock_guard<std::mutex> l(mu_);
    return delta_times_;
  }
  // Deltas that arrived in [from, to).
  int DeltasBetween(Clock::time_point from, Clock::time_point to) {
    std::lock_guard<std::mutex> l(mu_);
    return static_cast<int>(std::count_if(delta_times_.begin(), delta_times_.end(),
                                          [&](Clock::time_point t) { return t >= from && t < to; }));
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  std::vector<api::ToolCall> tool_calls_;
  std::vector<api::TokenLogprob> logprobs_;
  int n_deltas_ = 0;
  std::vector<Clock::time_point> delta_times_;
  Clock::time_point started_at_ = Clock::time_point::max();
  Clock::time_point done_at_;
  api::Usage usage_;
  api::FinishReason reason_ = api::FinishReason::kStop;
  Status error_;
  bool done_ = false;
};

}  // namespace agentkv::sched::testing
