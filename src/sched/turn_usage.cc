#include "sched/turn_usage.h"

namespace agentkv::sched {

void SetPromptUsage(const TurnPlan& plan, size_t n_new, api::CacheState state, bool shared, api::Usage* usage) {
  usage->cache_state = state;
  // prefix/'s MatchType and the API's list the same kinds in the same order.
  usage->match = state == api::CacheState::kCold ? api::MatchType::kMiss
                                                  : static_cast<api::MatchType>(static_cast<int>(plan.match));
  usage->cached_tokens = plan.n_keep;
  usage->prompt_tokens = plan.n_keep + static_cast<int64_t>(n_new);
  usage->shared_tokens = shared ? plan.n_keep : 0;
  usage->tokens_prefilled = static_cast<int64_t>(n_new);
}

}  // namespace agentkv::sched
