#include "sched/prefill_grant.h"

#include <algorithm>
#include <numeric>

namespace agentkv::sched {

std::vector<size_t> GrantPrefill(const std::vector<size_t>& remaining, int budget) {
  std::vector<size_t> grant(remaining.size(), 0);
  if (remaining.empty() || budget <= 0) return grant;
  grant[0] = std::min<size_t>(remaining[0], static_cast<size_t>(std::max(1, budget / 4)));
  size_t left = static_cast<size_t>(budget) - grant[0];
  std::vector<size_t> order(remaining.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return remaining[x] < remaining[y]; });
  for (size_t i : order) {
    if (left == 0) break;
    const size_t extra = std::min(left, remaining[i] - grant[i]);
    grant[i] += extra;
    left -= extra;
  }
  return grant;
}

}  // namespace agentkv::sched
