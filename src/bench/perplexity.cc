#include "bench/perplexity.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace agentkv::bench {

double TokenNll(std::span<const float> logits, int32_t token) {
  // Same arithmetic as llama-perplexity's log_softmax, so results agree to
  // the last printed digit (float max and expf, double accumulation).
  float max_logit = logits[0];
  for (float v : logits) max_logit = std::max(max_logit, v);
  double sum_exp = 0.0;
  for (float v : logits) sum_exp += expf(v - max_logit);
  return -(logits[static_cast<size_t>(token)] - max_logit - std::log(sum_exp));
}

double NllAccumulator::Ppl() const { return std::exp(MeanNll()); }

double NllAccumulator::PplError() const {
  if (count_ < 2) return 0;
  const double mean = MeanNll();
  const double var = sum2_ / static_cast<double>(count_) - mean * mean;
  if (var <= 0) return 0;
  return Ppl() * std::sqrt(var / static_cast<double>(count_ - 1));
}

Result<PplPlan> PlanPerplexity(int64_t n_tokens, const PplOptions& o) {
  const std::string op = "perplexity";
  if (o.n_ctx < 4) return Status::InvalidArgument(op + ": context must be >= 4 tokens");
  if (o.stride < 0 || o.stride >= o.n_ctx) {
    return Status::InvalidArgument(op + ": stride must be 0 (chunks) or 1.." + std::to_string(o.n_ctx - 1));
  }
  if (o.max_windows < 0) return Status::InvalidArgument(op + ": chunks must be >= 0");
  if (n_tokens < o.n_ctx) {
    return Status::InvalidArgument(op + ": text has " + std::to_string(n_tokens) + " tokens, fewer than one window of " +
                                   std::to_string(o.n_ctx));
  }
  PplPlan plan;
  if (o.stride == 0) {
    plan.window_step = o.n_ctx;
    plan.n_windows = static_cast<int>(n_tokens / o.n_ctx);
    plan.first_logit_pos = o.n_ctx / 2;
    plan.scored_per_window = o.n_ctx - plan.first_logit_pos - 1;
  } else {
    plan.window_step = o.stride;
    plan.n_windows = static_cast<int>((n_tokens - o.n_ctx) / o.stride + 1);
    plan.first_logit_pos = o.n_ctx - o.stride - 1;
    plan.scored_per_window = o.stride;
  }
  if (o.max_windows > 0) plan.n_windows = std::min(plan.n_windows, o.max_windows);
  return plan;
}

Result<PplResult> EvaluatePerplexity(engine::Context& ctx, std::span<const int32_t> tokens, int32_t bos,
                                     const PplOptions& options, const PplProgress& progress) {
  assert(ctx.options().slot_ctx >= options.n_ctx && bos >= 0);
  AGENTKV_ASSIGN_OR_RETURN(PplPlan plan, PlanPerplexity(static_cast<int64_t>(tokens.size()), options));
  const auto t0 = std::chrono::steady_clock::now();
  const int n_ctx = options.n_ctx;
  const int n_batch = ctx.options().n_batch;
  NllAccumulator acc;
  PplResult result;
  result.plan = plan;
  std::vector<engine::BatchItem> items;
  for (int w = 0; w < plan.n_windows; ++w) {
    const size_t start = static_cast<size_t>(w) * static_cast<size_t>(plan.window_step);
    ctx.ClearSlot(0);
    const bool round_trip = options.round_trip_context && ctx.spec().HybridSlots() && plan.first_logit_pos > 0;
    for (int b = 0; b < n_ctx;) {
      int end = std::min(n_ctx, b + n_batch);
      if (round_trip && b < plan.first_logit_pos) end = std::min(end, plan.first_logit_pos);
      items.clear();
      for (int pos = b; pos < end; ++pos) {
        const int32_t tok = pos == 0 ? bos : tokens[start + static_cast<size_t>(pos)];
        // The last position's logits would score a token outside the window.
        items.push_back({0, tok, pos, pos >= plan.first_logit_pos && pos < n_ctx - 1});
      }
      if (Status s = ctx.Decode(items); !s.ok()) {
        ctx.ClearSlot(0);
        return s.WithContext("perplexity: window " + std::to_string(w));
      }
      for (int i = 0; i < end - b; ++i) {
        if (!items[static_cast<size_t>(i)].want_logits) continue;
        const size_t next = start + static_cast<size_t>(b + i + 1);
        const std::span<const float> logits = ctx.Logits(i);
        acc.Add(TokenNll(logits, tokens[next]));
        result.top1.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      }
      if (round_trip && end == plan.first_logit_pos) {
        // The context through the at-rest type and back, as a restore does.
        auto blocks = ctx.ExportSlotBlocks(0);
        if (!blocks.ok()) return blocks.status().WithContext("perplexity: window " + std::to_string(w) + " export");
        std::vector<const KvBlock*> ptrs;
        for (const auto& blk : *blocks) ptrs.push_back(&blk);
        if (Status s = ctx.ImportSlotBlocks(0, ptrs, static_cast<uint32_t>(end)); !s.ok()) {
          ctx.ClearSlot(0);
          return s.WithContext("perplexity: window " + std::to_string(w) + " import");
        }
      }
      b = end;
    }
    result.n_evaluated += n_ctx;
    if (progress) progress(w, acc);
  }
  ctx.ClearSlot(0);
  result.ppl = acc.Ppl();
  result.ppl_error = acc.PplError();
  result.mean_nll = acc.MeanNll();
  result.n_scored = acc.count();
  result.eval_ms = MsSince(t0);
  return result;
}

double Top1Agreement(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  if (a.empty() || a.size() != b.size()) return 0;
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  return static_cast<double>(same) / static_cast<double>(a.size());
}

}  // namespace agentkv::bench
