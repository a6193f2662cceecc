#pragma once
// WaitingQueue: the inference loop's requests waiting for admission, oldest
// first, and the order in which admission tries them (TenantRoundRobin).
//
// Order: the requests' arrival at the server (OrderByArrival), first come
// first served within a tenant.
// A request leaves the queue one of three ways: admitted (AdmitRoundRobin's
// `try_admit` took it), ended while it waited (Expire: cancelled or past the
// queue timeout; its sink gets the error), or refused at shutdown (FailAll).
// Per-agent FIFO holds: the round-robin order keeps one tenant's requests in
// queue order, and an agent belongs to one tenant.
//
// Thread safety: none (the inference thread's).

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "api/backend.h"
#include "sched/metrics.h"
#include "sched/tenant_round_robin.h"
#include "sched/turn_plan.h"
#include "sched/turn_prompter.h"
#include "store/agent_record.h"

namespace agentkv::sched {

// A request queued for admission, with its prompt prepared (TurnPrompter).
struct WaitingTurn : PreparedPrompt {
  api::GenerationRequest req;
  std::shared_ptr<api::GenerationSink> sink;
  std::chrono::steady_clock::time_point received;
  // Side requests (Scheduler::TryAdmit): decided once, at the first admission
  // attempt; side_of is then the agent named by the client, req.agent_id the
  // side agent.
  bool side_checked = false;
  std::optional<AgentKey> side_of;
  // It takes the main role from a conversation of another head
  // (SideDecision::takes_over): its agent's cache is dropped once it is idle.
  bool takes_over = false;
  // Its agent starts from a prefix donor's cache (SeedFromDonor): any common
  // prefix is reused, however small a share of the donor's text it is.
  bool seeded = false;
  // A returning agent seeded instead of restoring its own cache: its own
  // sequence, put back if the turn's preparation fails (its blocks are still
  // in the pool or on disk).
  std::optional<CachedSequence> own_before_seed;

  AgentKey key() const { return {req.namespace_id, req.agent_id}; }
};

class WaitingQueue {
 public:
  using Entries = std::deque<std::unique_ptr<WaitingTurn>>;

  // Where new requests are appended (LoopInbox::Wait).
  Entries* entries() { return &entries_; }
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

  // Puts the entries in the order their requests reached the server
  // (WaitingTurn::received, stamped before the prompt was rendered and
  // tokenized), stable for equal times: a request whose prompt took longer to
  // prepare (a new agent's whole prompt vs a returning agent's few new
  // tokens) is not queued behind those that arrived after it. Call after new
  // entries were appended; cheap when they already are in order.
  void OrderByArrival();
  // Ends the requests that were cancelled or have waited longer than
  // `timeout_ms` at `now`: each sink gets Cancelled or FailedPrecondition
  // ("timed out ..."), counted in `metrics`. Returns their agents' keys, in
  // queue order (the caller drops forks made for them).
  std::vector<AgentKey> Expire(std::chrono::steady_clock::time_point now, int64_t timeout_ms,
                               SchedulerMetrics& metrics);
  // Offers every request to `try_admit` once, in TenantRoundRobin order given
  // the turns each tenant runs (`running`); those it takes (true) leave the
  // queue. `try_admit` may change the request (its agent id) and read the
  // queue (Wants), but must not add or remove entries. Returns how many left.
  size_t AdmitRoundRobin(const TenantRoundRobin::Counts& running, const std::function<bool(WaitingTurn&)>& try_admit);
  // Whether a waiting request is for `key`.
  bool Wants(const AgentKey& key) const;
  // The agents of the waiting requests.
  std::set<AgentKey> Keys() const;
  // Every sink gets `why`; the queue is left empty.
  void FailAll(const Status& why);

 private:
  Entries entries_;
  TenantRoundRobin order_;
};

}  // namespace agentkv::sched
