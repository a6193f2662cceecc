#include "sched/waiting_queue.h"

#include <algorithm>
#include <string>
#include <string_view>

namespace agentkv::sched {

void WaitingQueue::OrderByArrival() {
  const auto earlier = [](const auto& a, const auto& b) { return a->received < b->received; };
  if (!std::is_sorted(entries_.begin(), entries_.end(), earlier)) {
    std::stable_sort(entries_.begin(), entries_.end(), earlier);
  }
}

std::vector<AgentKey> WaitingQueue::Expire(std::chrono::steady_clock::time_point now, int64_t timeout_ms,
                                           SchedulerMetrics& metrics) {
  std::vector<AgentKey> ended;
  for (auto it = entries_.begin(); it != entries_.end();) {
    WaitingTurn& w = **it;
    const bool cancelled = w.req.cancel.cancelled();
    if (!cancelled && now - w.received <= std::chrono::milliseconds(timeout_ms)) {
      ++it;
      continue;
    }
    if (cancelled) {
      w.sink->OnError(Status::Cancelled("request cancelled while queued"));
      metrics.CountRequest("cancelled");
    } else {
      w.sink->OnError(Status::FailedPrecondition("timed out waiting for the agent or a free slot"));
      metrics.CountRequest("error");
    }
    ended.push_back(w.key());
    it = entries_.erase(it);
  }
  return ended;
}

size_t WaitingQueue::AdmitRoundRobin(const TenantRoundRobin::Counts& running,
                                     const std::function<bool(WaitingTurn&)>& try_admit) {
  if (entries_.empty()) return 0;
  std::vector<std::string_view> tenants;
  tenants.reserve(entries_.size());
  for (const auto& w : entries_) tenants.push_back(w->req.namespace_id);
  std::vector<bool> taken(entries_.size(), false);
  size_t n_taken = 0;
  for (size_t i : order_.Order(tenants, running)) {
    const std::string ns = entries_[i]->req.namespace_id;  // a copy: try_admit may move the request
    taken[i] = try_admit(*entries_[i]);
    if (!taken[i]) continue;
    order_.Admitted(ns);
    ++n_taken;
  }
  size_t i = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++i) {
    it = taken[i] ? entries_.erase(it) : it + 1;
  }
  return n_taken;
}

bool WaitingQueue::Wants(const AgentKey& key) const {
  for (const auto& w : entries_) {
    if (w->key() == key) return true;
  }
  return false;
}

std::set<AgentKey> WaitingQueue::Keys() const {
  std::set<AgentKey> keys;
  for (const auto& w : entries_) keys.insert(w->key());
  return keys;
}

void WaitingQueue::FailAll(const Status& why) {
  for (auto& w : entries_) w->sink->OnError(why);
  entries_.clear();
}

}  // namespace agentkv::sched
