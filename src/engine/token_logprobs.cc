#include "engine/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace agentkv::engine {

TokenLogprobs ComputeTokenLogprobs(std::span<const float> logits, int32_t token, int32_t k) {
  // log-softmax: x - (max + log(sum(exp(x - max)))), stable for any range.
  float max = -INFINITY;
  for (float x : logits) max = std::max(max, x);
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - double(max));
  const double log_z = double(max) + std::log(sum);
  TokenLogprobs out;
  out.logprob = static_cast<float>(double(logits[token]) - log_z);
  const size_t n = std::min<size_t>(static_cast<size_t>(k), logits.size());
  if (n == 0) return out;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), better);
  out.top.reserve(n);
  for (size_t i = 0; i < n; ++i) out.top.emplace_back(ids[i], static_cast<float>(double(logits[ids[i]]) - log_z));
  return out;
}

}  // namespace agentkv::engine
