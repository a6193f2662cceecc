#pragma once
// The prompt side of a turn's usage (api::Usage): what Scheduler::Prepare
// reports once the turn is planned. Pure; any thread.

#include <cstddef>

#include "api/backend.h"
#include "sched/turn_plan.h"

namespace agentkv::sched {

// Sets usage's cache_state, match, prompt_tokens, cached_tokens,
// shared_tokens and tokens_prefilled for a turn planned as `plan` whose
// `n_new` new tokens are prefilled (plan.new_tokens may have been moved out)
// and whose kept tokens came from `state` (kCold: nothing kept, a miss);
// `shared`: they are another agent's cache. Leaves the other fields as they are.
void SetPromptUsage(const TurnPlan& plan, size_t n_new, api::CacheState state, bool shared, api::Usage* usage);

}  // namespace agentkv::sched
