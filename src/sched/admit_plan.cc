#include "sched/admit_plan.h"

namespace agentkv::sched {

AdmitSteps PlanAdmit(const AdmitFacts& f) {
  AdmitSteps s;
  s.mark_isolated = f.isolated && !f.has_tokens;
  s.fork_parent = f.parent_ready && !f.has_tokens;
  s.wait = f.busy;
  if (s.wait) return s;
  s.drop_cache = f.takes_over;
  s.clear_slot = f.takes_over && f.resident;
  // The cache as the steps above leave it.
  const bool is_fork = (f.is_fork || s.fork_parent) && !s.drop_cache;
  // A returning agent too: a donor must then beat what its own cache shares
  // with the prompt (ChooseDonor); a fork already starts from another's cache.
  s.try_donor = f.reuse_cache && !is_fork && !f.isolated;
  return s;
}

FailedAdmitUndo PlanFailedAdmit(const FailedAdmitFacts& f) {
  FailedAdmitUndo u;
  u.forget_leader_seq = f.from_leader && f.owns_nothing;
  u.clear_slot = !f.resident && f.slot_written;
  u.drop_fork = f.is_fork && f.owns_nothing;
  return u;
}

}  // namespace agentkv::sched
