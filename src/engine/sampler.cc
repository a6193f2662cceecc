#include "engine/sampler.h"

#include <vector>

#include "llama.h"

namespace agentkv::engine {

Sampler::Sampler(const SamplingParams& params) : params_(params) {
  if (params.temperature <= 0.0f) return;
  chain_ = llama_sampler_chain_init(llama_sampler_chain_default_params());
  if (params.top_k > 0) llama_sampler_chain_add(chain_, llama_sampler_init_top_k(params.top_k));
  if (params.top_p < 1.0f) llama_sampler_chain_add(chain_, llama_sampler_init_top_p(params.top_p, 1));
  llama_sampler_chain_add(chain_, llama_sampler_init_temp(params.temperature));
  llama_sampler_chain_add(chain_, llama_sampler_init_dist(static_cast<uint32_t>(params.seed)));
}

Sampler::~Sampler() {
  if (chain_ != nullptr) llama_sampler_free(chain_);
}

int32_t Sampler::Greedy(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (chain_ == nullptr) return Greedy(logits);
  std::vector<llama_token_data> cand(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cand[i] = {static_cast<llama_token>(i), logits[i], 0.0f};
  llama_token_data_array arr{cand.data(), cand.size(), -1, false};
  llama_sampler_apply(chain_, &arr);
  const llama_token tok = arr.data[arr.selected].id;
  llama_sampler_accept(chain_, tok);
  return tok;
}

}  // namespace agentkv::engine
