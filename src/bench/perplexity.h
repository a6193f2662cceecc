#pragma once
// Perplexity of a token sequence, scored like llama.cpp's llama-perplexity.
//
// Two window schemes (n_ctx = c):
//  - chunks (stride 0), llama-perplexity's default: non-overlapping windows
//    [k c, (k+1) c), k < n_tokens / c. The first token of each window is
//    replaced by BOS; the logits at positions c/2 .. c-2 score the tokens at
//    c/2+1 .. c-1 (c/2 - 1 tokens per window; token c/2 itself is not scored).
//  - sliding (stride s, 0 < s < c): windows [k s, k s + c) for
//    k <= (n_tokens - c) / s, first token replaced by BOS; the logits at
//    positions c-s-1 .. c-2 score the window's last s tokens. Scored ranges
//    tile the text from token c-s on, each token with >= c-s-1 tokens of
//    context. (llama-perplexity's --ppl-stride differs: its window is
//    c + s/2 long and its BOS replacement happens after the decode, so it is
//    not applied; we do not reproduce that.)
// Per scored token: nll = -(logit[tok] - max - log(sum exp(logit - max))),
// max in float, the sum in double, as llama-perplexity's log_softmax.
// PPL = exp(mean nll); error = PPL * sqrt(var(nll) / (count - 1)).

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/context.h"
#include "util/status.h"

namespace agentkv::bench {

// Negative log-likelihood of `token` under softmax(logits).
// REQUIRES 0 <= token < logits.size().
double TokenNll(std::span<const float> logits, int32_t token);

// Running sums of per-token NLL; PPL and its standard error.
class NllAccumulator {
 public:
  void Add(double nll) {
    sum_ += nll;
    sum2_ += nll * nll;
    ++count_;
  }
  int64_t count() const { return count_; }
  double MeanNll() const { return count_ ? sum_ / static_cast<double>(count_) : 0; }
  double Ppl() const;
  // llama-perplexity's "+/-": PPL * stddev(nll) / sqrt(count - 1); 0 if count < 2.
  double PplError() const;

 private:
  double sum_ = 0;
  double sum2_ = 0;
  int64_t count_ = 0;
};

struct PplOptions {
  int n_ctx = 512;      // window length in tokens, >= 4
  int stride = 0;       // 0: llama-perplexity chunks; else sliding windows (< n_ctx)
  int max_windows = 0;  // 0: all the text allows
  // Hybrid slots (ctx's slots hold another KV type than its blocks, e.g. f16
  // slots over q4_0 blocks): the context of each window (positions before
  // the first scored logit) is decoded, exported to blocks and imported back
  // (the at-rest round trip a restored agent's cache went through), then the
  // scored part is decoded on top of it, attending to its own slot-type
  // rows: the quality a restored agent gets. No effect without hybrid slots.
  bool round_trip_context = false;
};

// Which windows a text of n_tokens yields. InvalidArgument for bad options
// or a text shorter than one window.
struct PplPlan {
  int n_windows = 0;
  int window_step = 0;     // tokens between window starts
  int first_logit_pos = 0; // first position in a window whose logits score a token
  int scored_per_window = 0;
};
Result<PplPlan> PlanPerplexity(int64_t n_tokens, const PplOptions& options);

struct PplResult {
  PplPlan plan;
  double ppl = 0;
  double ppl_error = 0;
  double mean_nll = 0;
  int64_t n_scored = 0;
  int64_t n_evaluated = 0;  // tokens run through the model
  double eval_ms = 0;       // wall time of the whole evaluation
  std::vector<int32_t> top1;  // per scored token, in order: the argmax of its logits
};

// Fraction of positions where two runs over the same plan agree on the top-1
// token; 0 when the sizes differ or are 0.
double Top1Agreement(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

// Called after each window with its 0-based index and the running result.
using PplProgress = std::function<void(int window, const NllAccumulator& so_far)>;

// Evaluates the perplexity of `tokens` (the whole text tokenized with BOS)
// in slot 0 of `ctx`, which is cleared before every window and left empty.
// Windows are decoded in pieces of ctx.options().n_batch tokens.
// REQUIRES ctx.options().slot_ctx >= options.n_ctx, bos >= 0.
// Errors: PlanPerplexity's, decode failures.
Result<PplResult> EvaluatePerplexity(engine::Context& ctx, std::span<const int32_t> tokens, int32_t bos,
                                     const PplOptions& options, const PplProgress& progress = nullptr);

}  // namespace agentkv::bench
