#pragma once
// Sampler: picks the next token from a logits row.
// Greedy when temperature <= 0; otherwise top-k -> top-p -> temperature ->
// seeded random draw (llama.cpp's sampler chain). Not thread-safe: one per request.

#include <cstdint>
#include <memory>
#include <span>

struct llama_sampler;

namespace agentkv::engine {

struct SamplingParams {
  float temperature = 0.0f;
  int32_t top_k = 0;    // 0: off
  float top_p = 1.0f;   // 1: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  int32_t Sample(std::span<const float> logits);
  // Argmax with ties broken by the lowest id.
  static int32_t Greedy(std::span<const float> logits);

 private:
  SamplingParams params_;
  llama_sampler* chain_ = nullptr;  // null when greedy
};

}  // namespace agentkv::engine
