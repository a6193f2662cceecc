#pragma once
// TokenLogprobs: a sampled token's log-probability and the k most likely
// tokens, from one logits row: log-softmax of the raw logits (temperature 1,
// before any sampler transform), computed in double. Ties in the top list go
// to the lower token id. Pure; any thread.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace agentkv::engine {

struct TokenLogprobs {
  float logprob = 0;                             // of the sampled token
  std::vector<std::pair<int32_t, float>> top;    // (token, logprob), best first, min(k, vocab) long
};

// REQUIRES: 0 <= token < logits.size(), k >= 0.
TokenLogprobs ComputeTokenLogprobs(std::span<const float> logits, int32_t token, int32_t k);

}  // namespace agentkv::engine
