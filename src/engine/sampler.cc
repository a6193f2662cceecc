#include "engine/sampler.h"

#include <cmath>
#include <string>
#include <vector>

#include "engine/chat_format.h"
#include "engine/model.h"
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

Result<std::unique_ptr<Sampler>> Sampler::Create(const SamplingParams& params, const Model& model,
                                                 const GrammarSpec& grammar) {
  auto s = std::make_unique<Sampler>(params);
  if (grammar.gbnf.empty()) return s;
  if (grammar.lazy) {
    std::vector<const char*> patterns;
    for (const std::string& p : grammar.trigger_patterns) patterns.push_back(p.c_str());
    std::vector<llama_token> tokens(grammar.trigger_tokens.begin(), grammar.trigger_tokens.end());
    s->grammar_ = llama_sampler_init_grammar_lazy_patterns(model.vocab(), grammar.gbnf.c_str(), "root",
                                                           patterns.data(), patterns.size(), tokens.data(),
                                                           tokens.size());
  } else {
    s->grammar_ = llama_sampler_init_grammar(model.vocab(), grammar.gbnf.c_str(), "root");
  }
  if (s->grammar_ == nullptr) return Status::InvalidArgument("sampler: the grammar does not parse");
  try {
    for (int32_t t : grammar.prefill_tokens) llama_sampler_accept(s->grammar_, t);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("sampler: the grammar refuses the generation prompt: ") + e.what());
  }
  return s;
}

Sampler::~Sampler() {
  if (chain_ != nullptr) llama_sampler_free(chain_);
  if (grammar_ != nullptr) llama_sampler_free(grammar_);
}

int32_t Sampler::Greedy(std::span<const float> logits) {
  // Two passes the compiler vectorizes: the top value (kLanes independent
  // running maxima), then the first id holding it. The one-pass argmax it
  // replaces cannot be vectorized and cost 116 us per token at a 32K vocab
  // (6-7% of the bundled model's decode step on 2 cores), 460 us at 128K;
  // this takes 15 and 103 us (SSE2 only; bench, 2-core VM). Same pick: NaN
  // never wins (a NaN at id 0 makes the pick 0, as before), ties go to the
  // lowest id, and -0.0 == 0.0.
  const size_t n = logits.size();
  if (n == 0) return 0;
  constexpr size_t kLanes = 16;
  float lane_max[kLanes];
  for (float& m : lane_max) m = logits[0];
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lane_max[j] = logits[i + j] > lane_max[j] ? logits[i + j] : lane_max[j];
  }
  float top = lane_max[0];
  for (float m : lane_max) top = m > top ? m : top;
  for (; i < n; ++i) top = logits[i] > top ? logits[i] : top;
  for (size_t k = 0; k < n; ++k) {
    if (logits[k] == top) return static_cast<int32_t>(k);
  }
  return 0;  // top is NaN: only when logits[0] is
}

int32_t Sampler::Sample(std::span<const float> logits) {
  if (chain_ == nullptr && grammar_ == nullptr) return Greedy(logits);
  std::vector<llama_token_data> cand(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cand[i] = {static_cast<llama_token>(i), logits[i], 0.0f};
  llama_token_data_array arr{cand.data(), cand.size(), -1, false};
  if (grammar_ != nullptr) llama_sampler_apply(grammar_, &arr);  // forbidden tokens -> -inf
  llama_token tok;
  if (chain_ != nullptr) {
    llama_sampler_apply(chain_, &arr);
    tok = arr.data[arr.selected].id;
    llama_sampler_accept(chain_, tok);
  } else {
    size_t best = 0;  // greedy over the allowed tokens, ties to the lowest id (cand is in id order)
    for (size_t i = 1; i < arr.size; ++i) {
      if (arr.data[i].logit > arr.data[best].logit) best = i;
    }
    tok = arr.data[best].id;
  }
  if (grammar_ != nullptr) {
    try {
      llama_sampler_accept(grammar_, tok);
    } catch (const std::exception&) {
      // Only when the grammar allowed no token at all (every logit -inf):
      // the pick stands and the reply's parser reports what it can.
    }
  }
  return tok;
}

}  // namespace agentkv::engine
