// Scheduler, inference thread: starting a new agent from another agent's
// cache of the same prompt prefix (prefix donors, sched/prefix_donor.h).
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
  IdleDonor idle_donor;
  const Agent* idle_agent = tiers_.FindIdleDonor(agent, w.prompt, &idle_donor);
  std::optional<IdleDonor> idle;
  if (idle_agent != nullptr) idle = idle_donor;
  std::vector<Leader> leaders;
  std::vector<const Active*> leader_turns;
  for (const auto& a : active_) {
    const Agent& l = *a->agent;
    // A pipelined restore's slot is still being written by its import.
    if (a->done || &l == &agent || l.key.ns != ns || l.isolated || a->slot < 0 || a->restore) continue;
    leaders.push_back({CommonPrefixBytes(a->w->prompt, w.prompt), ComputedBytes(l.seq), a->decoding});
    leader_turns.push_back(a.get());
  }
  const DonorChoice choice = ChooseDonor(0, idle, leaders);
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
