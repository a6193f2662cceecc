#pragma once
// The decisions of a request's admission (Scheduler::TryAdmit), as pure
// functions of what the scheduler found out about the request's agent: no
// table, no tiers, no slots. TryAdmit gathers the facts (its lookups may post
// reads), asks here what to do, and does it.
//
// Thread safety: pure functions; any thread.

namespace agentkv::sched {

// What TryAdmit knows once the request's agent (and its parent, if it names
// one) has been looked up.
struct AdmitFacts {
  bool has_tokens = false;    // the agent has a cached sequence
  bool is_fork = false;       // it is set up to start from another agent's cache (Agent::fork_source)
  bool busy = false;          // a turn of it runs
  bool resident = false;      // it holds a slot
  bool parent_ready = false;  // it names a parent that is known, idle and has a cache
  bool takes_over = false;    // the request takes the main role from another conversation (Waiting::takes_over)
  bool reuse_cache = true;    // the request may start from a cache (cache_prompt)
  bool isolated = false;      // the request is isolated
};

// What TryAdmit does, in this order.
struct AdmitSteps {
  // A new agent of an isolated request: never another request's implicit
  // candidate nor a prefix donor (Agent::isolated).
  bool mark_isolated = false;
  // A new agent with a ready parent (a subagent) starts as a fork of the
  // parent's cache, as an implicit DIVERGE does. Done even when `wait`.
  bool fork_parent = false;
  // Busy: the request keeps waiting (after fork_parent).
  bool wait = false;
  // It takes over: the agent's cache is another conversation's; its
  // sequence and fork are dropped, and its slot cleared if `clear_slot`.
  bool drop_cache = false;
  bool clear_slot = false;
  // Not a fork after the steps above, the cache may be reused and the
  // request is not isolated: look for a prefix donor (SeedFromDonor), which
  // a returning agent takes only where it shares more than its own cache.
  bool try_donor = false;
};
AdmitSteps PlanAdmit(const AdmitFacts& facts);

// What TryAdmit knows when the turn's preparation (Scheduler::Prepare) failed.
struct FailedAdmitFacts {
  bool from_leader = false;     // the turn was to start from a leader's slot
  bool owns_nothing = false;    // the agent has no blocks of its own: never committed, not on disk, no slot
  bool resident = false;        // the agent holds a slot
  bool slot_written = false;    // the slot acquired for the turn holds cells
  bool is_fork = false;         // the agent is still set up as a fork
};

// What is undone, in this order.
struct FailedAdmitUndo {
  // Its copy of the leader's sequence goes: no blocks back it.
  bool forget_leader_seq = false;
  // The acquired slot's cells go (never a resident agent's).
  bool clear_slot = false;
  // A fork that never ran is erased (Scheduler::DropUnstartedFork).
  bool drop_fork = false;
};
FailedAdmitUndo PlanFailedAdmit(const FailedAdmitFacts& facts);

}  // namespace agentkv::sched
