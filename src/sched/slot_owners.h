#pragma once
// SlotOwners: which agent each engine slot holds. The one record of
// residency: Agent::slot follows it (Set), other threads ask IsResident
// (AgentTiers' early read on Submit skips a resident agent), and /metrics
// reads its gauges.
//
// Thread safety: the inference thread only, except IsResident and the
// gauges (any thread). mu_ guards the owners' keys, written only by Set.
// Invariants: owner(s) == a  <=>  a->slot == s; keys_[s] is owner(s)'s key
// (empty agent id: none).

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "sched/agent_table.h"
#include "util/mutex.h"

namespace agentkv::sched {

class SlotOwners {
 public:
  explicit SlotOwners(int n_slots);

  int size() const { return static_cast<int>(owners_.size()); }
  Agent* owner(int slot) const { return owners_[static_cast<size_t>(slot)]; }
  // `agent` (null: nobody) now holds `slot`; its previous owner holds no slot.
  void Set(int slot, Agent* agent);
  // The first slot with no owner that `usable` accepts; -1 if none.
  int Free(const std::function<bool(int slot)>& usable) const;
  // The slot an idle resident agent gives up for `for_agent` (side agents
  // first, least recently used first: PickSlotVictim; a slot with no owner
  // counts as busy); -1 if every slot is busy.
  int Victim(const Agent& for_agent) const;
  // The slot `for_agent` runs in: its own, else the first free one `usable`
  // accepts, else a Victim's, whose owner is then unset after `evict(slot)`
  // ran (the caller empties the engine slot); -1 if none.
  int Acquire(const Agent& for_agent, const std::function<bool(int slot)>& usable,
              const std::function<void(int slot)>& evict);
  // After an iteration: recomputes the gauges from the owners.
  void UpdateGauges();

  // Any thread.
  bool IsResident(const AgentKey& key) const;
  uint64_t agents_gauge() const { return agents_gauge_.load(); }  // resident agents
  uint64_t tokens_gauge() const { return tokens_gauge_.load(); }  // their tokens

 private:
  std::vector<Agent*> owners_;  // per slot, null if free
  mutable Mutex mu_;
  std::vector<AgentKey> keys_ GUARDED_BY(mu_);
  std::atomic<uint64_t> agents_gauge_{0}, tokens_gauge_{0};
};

}  // namespace agentkv::sched
