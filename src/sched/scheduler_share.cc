// Scheduler, inference thread: starting a new agent from another agent's
// cache of the same prompt prefix (prefix donors, sched/prefix_donor.h).
#include <algorithm>

#include "prefix/prefix_match.h"
#include "sched/scheduler.h"
#include "sched/scheduler_types.h"
#include "util/log.h"

namespace agentkv::sched {
namespace {

// The end of the prompt text a turn's slot has computed: its last computed
// token's span end (0 while an unaligned token, e.g. byte fallback, ends it:
// the leader is then used only once its prefill is done).
size_t ComputedBytes(const CachedSequence& seq) {
  if (seq.spans.empty() || seq.spans.back().end == engine::kUnalignedSpan) return 0;
  return seq.spans.back().end;
}

}  // namespace

DonorChoice::Kind Scheduler::SeedFromDonor(Waiting& w, Agent& agent, RestoreSource* source) {
  const std::string& ns = agent.key.ns;
  // A returning agent's own cache is a candidate too: a donor must share
  // kMinSharedPrefixBytes more of the prompt than it does.
  const bool has_own = !agent.seq.tokens.empty();
  const size_t own_common =
      has_own ? std::min(CommonPrefixBytes(agent.seq.text, w.prompt), ComputedBytes(agent.seq)) : 0;
  // No donor can beat that (the usual next turn): no lookups.
  if (has_own && w.prompt.size() < own_common + kMinSharedPrefixBytes) return DonorChoice::Kind::kNone;
  IdleDonor idle_donor;
  // A returning agent never posts the namespace's index read (AgentTiers::
  // MergeNamespaceIndex): after a restart it would queue before other
  // agents' own reads; it looks among idle donors once a new agent has.
  const bool look_idle = !has_own || tiers_.NamespaceMerged(ns);
  const Agent* idle_agent = look_idle ? tiers_.FindIdleDonor(agent, w.prompt, &idle_donor) : nullptr;
  std::optional<IdleDonor> idle;
  if (idle_agent != nullptr) idle = idle_donor;
  std::vector<Leader> leaders;
  std::vector<const Active*> leader_turns;
  for (const auto& a : active_) {
    const Agent& l = *a->agent;
    // A pipelined restore's slot does not hold its rows yet.
    if (a->done || &l == &agent || l.key.ns != ns || l.isolated || a->slot < 0 || a->restore) continue;
    leaders.push_back({CommonPrefixBytes(a->w->prompt, w.prompt), ComputedBytes(l.seq), a->decoding});
    leader_turns.push_back(a.get());
  }
  const DonorChoice choice = ChooseDonor(own_common, idle, leaders);
  if (has_own && (choice.kind == DonorChoice::Kind::kIdle || choice.kind == DonorChoice::Kind::kLeader)) {
    AKV_LOG_DEBUG("agent %s: a donor shares %zu bytes of its prompt, its own cache %zu", agent.key.agent_id.c_str(),
                  choice.common_bytes, own_common);
    w.own_before_seed = std::move(agent.seq);
    agent.seq = {};
    if (agent.slot >= 0) {  // its turn's end committed the slot to the pool (and the disk)
      ctx_.ClearSlot(agent.slot);
      slots_.Set(agent.slot, nullptr);
    }
  }
  switch (choice.kind) {
    case DonorChoice::Kind::kNone:
    case DonorChoice::Kind::kWaitForLeader:
      break;
    case DonorChoice::Kind::kIdle:
      agent.seq = idle_agent->seq;
      agent.fork_source = idle_agent->key;
      w.seeded = true;
      AKV_LOG_DEBUG("agent %s: starts from idle agent %s (%zu bytes shared)", agent.key.agent_id.c_str(),
                    idle_agent->key.agent_id.c_str(), choice.common_bytes);
      break;
    case DonorChoice::Kind::kLeader: {
      const Active& leader = *leader_turns[choice.leader];
      source->state = api::CacheState::kResident;
      source->leader = leader.agent;
      w.seeded = true;
      AKV_LOG_DEBUG("agent %s: starts from running agent %s's slot (%zu bytes shared)", agent.key.agent_id.c_str(),
                    leader.agent->key.agent_id.c_str(), choice.common_bytes);
      break;
    }
  }
  return choice.kind;
}

}  // namespace agentkv::sched
