#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/chat_format.h"
#include "engine/grammar.h"
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

Sampler::Sampler(const SamplingParams& params, const std::shared_ptr<const Grammar>& grammar) : Sampler(params) {
  if (grammar != nullptr) grammar_ = std::make_unique<GrammarState>(*grammar);
}

Result<std::unique_ptr<Sampler>> Sampler::Create(const SamplingParams& params, const Model& model,
                                                 const GrammarSpec& grammar) {
  if (grammar.gbnf.empty()) return std::make_unique<Sampler>(params);
  Result<std::shared_ptr<const Grammar>> g = Grammar::Compile(model, grammar);
  if (!g.ok()) return g.status();
  return std::make_unique<Sampler>(params, g.value());
}

Sampler::~Sampler() {
  if (chain_ != nullptr) llama_sampler_free(chain_);
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

int32_t Sampler::Unconstrained(std::span<const float> logits) {
  if (chain_ == nullptr) return Greedy(logits);
  std::vector<llama_token_data> cand(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cand[i] = {static_cast<llama_token>(i), logits[i], 0.0f};
  llama_token_data_array arr{cand.data(), cand.size(), -1, false};
  llama_sampler_apply(chain_, &arr);
  return arr.data[arr.selected].id;
}

Result<int32_t> Sampler::Sample(std::span<const float> logits) {
  if (grammar_ == nullptr) {
    const int32_t tok = Unconstrained(logits);
    if (chain_ != nullptr) llama_sampler_accept(chain_, tok);
    return tok;
  }
  if (failed_) return Status::InvalidArgument("sampler: failed before");
  Result<int32_t> tok = SampleWithGrammar(logits);
  if (tok.ok()) tok = EndInsteadOfTrailingBlank(tok.value());
  if (tok.ok()) {
    const auto t0 = std::chrono::steady_clock::now();
    Status accepted = grammar_->Accept(tok.value());
    grammar_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    if (!accepted.ok()) tok = accepted;
  }
  if (!tok.ok()) {
    failed_ = true;
    return tok;
  }
  if (chain_ != nullptr) llama_sampler_accept(chain_, tok.value());
  ++n_sampled_;
  return tok;
}

int32_t Sampler::EndInsteadOfTrailingBlank(int32_t pick) const {
  // A weak model rarely picks the end token: after a complete call it pads
  // with the whitespace the grammar still allows until max_tokens.
  if (!grammar_->Complete() || !grammar_->IsBlank(pick)) return pick;
  const int32_t end = grammar_->EndToken();
  return end >= 0 && grammar_->Allows(end) ? end : pick;
}

Result<int32_t> Sampler::SampleWithGrammar(std::span<const float> logits) {
  if (logits.empty()) return Status::InvalidArgument("sampler: no logits");
  // The unconstrained pick, judged alone: usually allowed (a model that
  // follows the format), then nothing else is judged.
  const int32_t pick = Unconstrained(logits);
  bool allowed = false;
  AGENTKV_RETURN_IF_ERROR(Judge(std::span<const int32_t>(&pick, 1), std::span<bool>(&allowed, 1)));
  if (allowed) return pick;
  return chain_ == nullptr ? GreedyAllowed(logits) : DrawAllowed(logits);
}

Result<int32_t> Sampler::GreedyAllowed(std::span<const float> logits) {
  // Candidates in Greedy's order (larger logit first, ties to the lower id;
  // NaN last); the first allowed one in that order is the pick.
  auto key = [&](int32_t t) { return std::isnan(logits[t]) ? -INFINITY : logits[t]; };
  auto before = [&](int32_t a, int32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); };
  const size_t n = logits.size();
  std::vector<int32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
  const size_t sorted = std::min<size_t>(8192, n);
  std::partial_sort(order.begin(), order.begin() + sorted, order.end(), before);
  std::unique_ptr<bool[]> allowed_owner(new bool[n]());
  bool* allowed = allowed_owner.get();
  size_t begin = 0;
  for (size_t end : {std::min<size_t>(64, sorted), std::min<size_t>(1024, sorted), sorted}) {  // best 64, 1,024, 8,192
    if (end <= begin) continue;
    AGENTKV_RETURN_IF_ERROR(Judge(std::span<const int32_t>(order.data() + begin, end - begin),
                                  std::span<bool>(allowed + begin, end - begin)));
    for (size_t i = begin; i < end; ++i) {
      if (allowed[i]) return order[i];
    }
    begin = end;
  }
  // The rest (unsorted): judge all, keep the best allowed.
  AGENTKV_RETURN_IF_ERROR(Judge(std::span<const int32_t>(order.data() + begin, n - begin),
                                std::span<bool>(allowed + begin, n - begin)));
  int32_t best = -1;
  for (size_t i = begin; i < n; ++i) {
    if (allowed[i] && (best < 0 || before(order[i], best))) best = order[i];
  }
  if (best < 0) return Status::InvalidArgument("sampler: the grammar allows no token here");
  return best;
}

Result<int32_t> Sampler::DrawAllowed(std::span<const float> logits) {
  const size_t n = logits.size();
  std::vector<int32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(i);
  std::unique_ptr<bool[]> allowed_owner(new bool[n]());
  bool* allowed = allowed_owner.get();
  AGENTKV_RETURN_IF_ERROR(Judge(ids, std::span<bool>(allowed, n)));
  std::vector<llama_token_data> cand;
  for (size_t i = 0; i < n; ++i) {
    if (allowed[i]) cand.push_back({static_cast<llama_token>(i), logits[i], 0.0f});
  }
  if (cand.empty()) return Status::InvalidArgument("sampler: the grammar allows no token here");
  llama_token_data_array arr{cand.data(), cand.size(), -1, false};
  llama_sampler_apply(chain_, &arr);
  return arr.data[arr.selected].id;
}

Status Sampler::OverBudget() const {
  const double budget_ms =
      params_.grammar_budget_base_ms + params_.grammar_budget_per_token_ms * static_cast<double>(n_sampled_ + 1);
  if (grammar_ms() < budget_ms) return Status::OK();
  return Status::InvalidArgument("the grammar of 'response_format' or 'tools' took " +
                                 std::to_string(static_cast<int64_t>(grammar_ms())) + " ms of sampling after " +
                                 std::to_string(n_sampled_) + " tokens, more than this request's budget of " +
                                 std::to_string(static_cast<int64_t>(budget_ms)) + " ms; simplify the schema");
}

Status Sampler::Judge(std::span<const int32_t> tokens, std::span<bool> allowed) {
  // In chunks, with the budget checked before each: one step overruns the
  // budget by at most one chunk's cost.
  constexpr size_t kChunk = 128;  // 0.3 ms at kMaxGrammarStacks; ~100 ms for the costliest grammar seen
  for (size_t at = 0; at < tokens.size(); at += kChunk) {
    AGENTKV_RETURN_IF_ERROR(OverBudget());
    const size_t len = std::min(kChunk, tokens.size() - at);
    const auto t0 = std::chrono::steady_clock::now();
    grammar_->Check(tokens.subspan(at, len), allowed.subspan(at, len));
    grammar_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    grammar_candidates_ += len;
  }
  return Status::OK();
}

}  // namespace agentkv::engine
