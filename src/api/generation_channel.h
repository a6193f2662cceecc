#pragma once
// GenerationChannel: the GenerationSink that api/ hands to Backend::Submit.
// The backend thread pushes events; one HTTP thread drains them. Events are
// native (no JSON): formatting happens on the HTTP thread, never on the
// backend's.
//
// Thread safety: On* may be called from any one thread at a time, Wait from
// one other thread; the two sides meet only under mu_.
// Invariants: events are delivered in the order pushed; nothing is accepted
// after a terminal event (finish or error).

#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include "api/backend.h"
#include "util/mutex.h"

namespace agentkv::api {

struct GenerationEvent {
  enum class Kind { kStart, kDelta, kReasoning, kToolCall, kLogprob, kFinish, kError };
  Kind kind = Kind::kStart;
  std::string text;  // kDelta, kReasoning: raw bytes
  ToolCallDelta tool_call;  // kToolCall
  TokenLogprob logprob;     // kLogprob
  FinishReason finish = FinishReason::kStop;
  Usage usage;    // kFinish; kStart: the prompt's usage (OnPromptUsage), if the backend sent it
  Status status;  // kError

  bool terminal() const { return kind == Kind::kFinish || kind == Kind::kError; }
};

class GenerationChannel final : public GenerationSink {
 public:
  void OnPromptUsage(const Usage& usage) override;
  void OnStart() override;
  void OnDelta(std::string_view text) override;
  void OnToolCallDelta(const ToolCallDelta& delta) override;
  void OnReasoningDelta(std::string_view text) override;
  void OnLogprob(const TokenLogprob& logprob) override;
  void OnFinish(FinishReason reason, const Usage& usage) override;
  void OnError(const Status& status) override;

  // Waits up to `timeout` for events and moves all pending ones to the end
  // of *out, adjacent text (or reasoning) deltas merged (and adjacent argument deltas of
  // one tool call). Returns false if none arrived in time.
  bool Wait(std::chrono::milliseconds timeout, std::vector<GenerationEvent>* out);

 private:
  void Push(GenerationEvent event);

  Mutex mu_;
  CondVar cv_;
  std::deque<GenerationEvent> events_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;  // a terminal event was pushed
  Usage prompt_usage_;                  // written by the backend's thread before OnStart only
};

}  // namespace agentkv::api
