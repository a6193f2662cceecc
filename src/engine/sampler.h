#pragma once
// Sampler: picks the next token from a logits row.
// Greedy when temperature <= 0; otherwise top-k -> top-p -> temperature ->
// seeded random draw (llama.cpp's sampler chain). With a grammar (GBNF,
// engine/grammar.h) the pick always continues a sentence of the grammar; a
// lazy grammar constrains nothing until one of its triggers was generated.
//
// Grammar cost: the unconstrained pick is made first and checked alone (one
// candidate, as llama.cpp's server does); only when the grammar forbids it
// is the grammar applied to more candidates: greedy, in logit order (the best
// 64, then 1,024, then 8,192, then the rest); with temperature, to the whole vocabulary,
// then the chain draws again from the allowed tokens.
//  - Greedy picks exactly the token that masking the whole vocabulary first
//    would (the best allowed one, ties to the lowest id).
//  - With temperature and neither top-k nor top-p, the pick's distribution is
//    the same too (accept p(t) if allowed, else draw from p restricted to the
//    allowed set: P(t) = p(t) / p(allowed)); top-k/top-p cut the unconstrained
//    distribution first, so there the distribution differs slightly from
//    cutting the constrained one. Seeded draws are not the same sequence as
//    with masking first (a rejected draw consumes the generator).
// Stop on close: once the text is a whole sentence of the grammar (a forced
// tool call or a JSON reply has closed), a whitespace-only pick, which could
// only pad the end, is replaced by the end-of-generation token: the turn
// ends there (finish_reason "tool_calls" / "stop") instead of running to
// max_tokens on spaces. A non-blank pick (e.g. a further parallel call)
// continues the sentence.
// Each request has a budget of grammar time (kGrammarBudgetBaseMs plus
// kGrammarBudgetPerTokenMs per sampled token); past it, and between chunks of
// candidates within a step, Sample fails and the turn should end.
// Not thread-safe: one per request.

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "util/status.h"

struct llama_sampler;

namespace agentkv::engine {

class Grammar;
class GrammarState;
class Model;
struct GrammarSpec;

// 1 s of grammar time per request, plus 10 ms per sampled token: a legal
// JSON schema costs well under 1 ms per token (most picks are checked alone);
// past this a request's grammar would slow every other tenant's steps.
inline constexpr double kGrammarBudgetBaseMs = 1000.0;
inline constexpr double kGrammarBudgetPerTokenMs = 10.0;

struct SamplingParams {
  float temperature = 0.0f;
  int32_t top_k = 0;    // 0: off
  float top_p = 1.0f;   // 1: off
  uint64_t seed = 0;
  // Grammar time allowed (see above); tests lower it.
  double grammar_budget_base_ms = kGrammarBudgetBaseMs;
  double grammar_budget_per_token_ms = kGrammarBudgetPerTokenMs;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // With a compiled grammar (null: none); never fails. The sampler keeps its
  // own position in it.
  Sampler(const SamplingParams& params, const std::shared_ptr<const Grammar>& grammar);
  // Compiles `grammar` (Grammar::Compile's errors) on the calling thread.
  static Result<std::unique_ptr<Sampler>> Create(const SamplingParams& params, const Model& model,
                                                 const GrammarSpec& grammar);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // The next token. Without a grammar never fails. With one:
  // InvalidArgument when the request's grammar time is spent, the grammar
  // allows no token, or it grows past kMaxGrammarStacks; the sampler is
  // unusable afterwards.
  Result<int32_t> Sample(std::span<const float> logits);
  // Time spent in the grammar so far, and how many candidates it judged.
  double grammar_ms() const { return grammar_ns_ / 1e6; }
  uint64_t grammar_candidates() const { return grammar_candidates_; }
  // Argmax with ties broken by the lowest id.
  static int32_t Greedy(std::span<const float> logits);

 private:
  int32_t Unconstrained(std::span<const float> logits);
  Result<int32_t> SampleWithGrammar(std::span<const float> logits);
  // `pick`, or the end token where the grammar is complete and `pick` is
  // whitespace only (stop on close, above).
  int32_t EndInsteadOfTrailingBlank(int32_t pick) const;
  Result<int32_t> GreedyAllowed(std::span<const float> logits);
  Result<int32_t> DrawAllowed(std::span<const float> logits);
  // Judges tokens[i] for each i (allowed[i]), charging the budget;
  // InvalidArgument once it is spent.
  Status Judge(std::span<const int32_t> tokens, std::span<bool> allowed);
  Status OverBudget() const;

  SamplingParams params_;
  llama_sampler* chain_ = nullptr;         // null when greedy
  std::unique_ptr<GrammarState> grammar_;  // null without a grammar
  int64_t grammar_ns_ = 0;
  uint64_t grammar_candidates_ = 0;
  uint64_t n_sampled_ = 0;
  bool failed_ = false;
};

}  // namespace agentkv::engine
