#include "sched/slot_owners.h"

#include <algorithm>

#include "sched/side_request.h"

namespace agentkv::sched {

SlotOwners::SlotOwners(int n_slots)
    : owners_(static_cast<size_t>(std::max(n_slots, 0)), nullptr), keys_(owners_.size()) {}

void SlotOwners::Set(int slot, Agent* agent) {
  Agent*& owner = owners_[static_cast<size_t>(slot)];
  if (owner != nullptr) owner->slot = -1;
  owner = agent;
  if (agent != nullptr) agent->slot = slot;
  MutexLock lock(&mu_);
  keys_[static_cast<size_t>(slot)] = agent != nullptr ? agent->key : AgentKey{};
}

int SlotOwners::Free(const std::function<bool(int)>& usable) const {
  for (int s = 0; s < size(); ++s) {
    if (owner(s) == nullptr && usable(s)) return s;
  }
  return -1;
}

int SlotOwners::Victim(const Agent& for_agent) const {
  std::vector<VictimCandidate> candidates;
  candidates.reserve(owners_.size());
  for (const Agent* a : owners_) {
    candidates.push_back(a == nullptr ? VictimCandidate{.busy = true}
                                      : VictimCandidate{a->busy, a->side_of.has_value(), a->key == for_agent.side_of,
                                                        a->last_use_ms});
  }
  const size_t pick = PickSlotVictim(candidates);
  return pick == std::string::npos ? -1 : static_cast<int>(pick);
}

int SlotOwners::Acquire(const Agent& for_agent, const std::function<bool(int)>& usable,
                        const std::function<void(int)>& evict) {
  if (for_agent.slot >= 0) return for_agent.slot;
  if (const int free = Free(usable); free >= 0) return free;
  const int slot = Victim(for_agent);
  if (slot < 0) return -1;
  evict(slot);
  Set(slot, nullptr);
  return slot;
}

void SlotOwners::UpdateGauges() {
  uint64_t agents = 0, tokens = 0;
  for (const Agent* a : owners_) {
    if (a == nullptr) continue;
    ++agents;
    tokens += a->seq.tokens.size();
  }
  agents_gauge_ = agents;
  tokens_gauge_ = tokens;
}

bool SlotOwners::IsResident(const AgentKey& key) const {
  if (key.agent_id.empty()) return false;
  MutexLock lock(&mu_);
  return std::find(keys_.begin(), keys_.end(), key) != keys_.end();
}

}  // namespace agentkv::sched
