#pragma once
// Sampler: picks the next token from a logits row.
// Greedy when temperature <= 0; otherwise top-k -> top-p -> temperature ->
// seeded random draw (llama.cpp's sampler chain). With a grammar (GBNF,
// engine/chat_format.h GrammarSpec) the tokens it forbids are masked first,
// so the pick always continues a sentence of the grammar; a lazy grammar
// masks nothing until one of its triggers has been generated.
// Not thread-safe: one per request.

#include <cstdint>
#include <memory>
#include <span>

#include "util/status.h"

struct llama_sampler;

namespace agentkv::engine {

class Model;
struct GrammarSpec;

struct SamplingParams {
  float temperature = 0.0f;
  int32_t top_k = 0;    // 0: off
  float top_p = 1.0f;   // 1: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // With a grammar. InvalidArgument: the GBNF does not parse, or the
  // grammar refuses its own prefill tokens.
  static Result<std::unique_ptr<Sampler>> Create(const SamplingParams& params, const Model& model,
                                                 const GrammarSpec& grammar);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  int32_t Sample(std::span<const float> logits);
  // Argmax with ties broken by the lowest id.
  static int32_t Greedy(std::span<const float> logits);

 private:
  SamplingParams params_;
  llama_sampler* chain_ = nullptr;    // null when greedy
  llama_sampler* grammar_ = nullptr;  // null without a grammar
};

}  // namespace agentkv::engine
