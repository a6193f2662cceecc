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
// Greedy-decodes n tokens in `slot` starting from `logits`; returns the tokens.
Result<std::vector<int32_t>> GreedyDecode(Context& ctx, int slot, std::vector<float> logits, int n);
// Largest |a[i] - b[i]| (REQUIRES equal sizes), and the index of the largest value.
float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b);
int32_t Argmax(const std::vector<float>& logits);

}  // namespace agentkv::engine::testing
