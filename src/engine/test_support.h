#pragma once
// Helpers shared by engine tests (and tests of layers above the engine).

#include <string>
#include <vector>

#include "engine/context.h"

namespace agentkv::engine::testing {

// The bundled model (models/tiny-llama-brown-16m-q8_0.gguf).
std::string BundledModelPath();
// A few KB of held-out English text (models/brown_test.txt), `bytes` long.
std::string SampleText(size_t bytes);

// Feeds tokens into `slot` starting at its current length, in chunks of
// n_batch, and returns the logits after the last token.
Result<std::vector<float>> Prefill(Context& ctx, int slot, const std::vector<int32_t>& tokens);
// The same with batches of `chunk` tokens (<= n_batch) instead of n_batch.
Result<std::vector<float>> PrefillInChunks(Context& ctx, int slot, const std::vector<int32_t>& tokens, size_t chunk);
// Greedy-decodes n tokens in `slot` starting from `logits`; returns the tokens.
Result<std::vector<int32_t>> GreedyDecode(Context& ctx, int slot, std::vector<float> logits, int n);
// Greedy decoding that also records, for each step, the gap between the best
// and the second-best logit (how close the choice was to a tie).
struct GreedyRun {
  std::vector<int32_t> tokens;
  std::vector<float> top2_gap;  // one per token
};
Result<GreedyRun> GreedyDecodeWithGaps(Context& ctx, int slot, std::vector<float> logits, int n);
// Leading steps of two runs that an oracle may compare: up to (excluding) the
// first step where either run's top-2 gap is below `tie`, there two kernels'
// rounding may legitimately pick different tokens.
size_t StepsBeforeNearTie(const GreedyRun& a, const GreedyRun& b, float tie);

// Largest |a[i] - b[i]|; +infinity (fails any tolerance) if the sizes differ,
// either is empty, or a difference is not finite (NaN, inf).
float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b);
// Index of the largest value.
int32_t Argmax(const std::vector<float>& logits);

}  // namespace agentkv::engine::testing
