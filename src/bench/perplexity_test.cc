#include "bench/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "engine/test_support.h"
#include "engine/tokenizer.h"

namespace agentkv::bench {
namespace {

TEST(TokenNllTest, MatchesLogSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, -1.0f};
  double z = 0;
  for (float v : logits) z += std::exp(static_cast<double>(v));
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(TokenNll(logits, t), std::log(z) - logits[t], 1e-6);
}

TEST(NllAccumulatorTest, PplAndError) {
  NllAccumulator acc;
  EXPECT_EQ(acc.PplError(), 0);
  for (double v : {1.0, 2.0, 3.0}) acc.Add(v);
  EXPECT_NEAR(acc.Ppl(), std::exp(2.0), 1e-12);
  // var = (1+4+9)/3 - 4 = 2/3; error = ppl * sqrt(var / 2).
  EXPECT_NEAR(acc.PplError(), std::exp(2.0) * std::sqrt(1.0 / 3.0), 1e-12);
}

TEST(PlanPerplexityTest, ChunksLikeLlamaPerplexity) {
  auto plan = PlanPerplexity(156030, {512, 0, 0});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->n_windows, 304);
  EXPECT_EQ(plan->window_step, 512);
  EXPECT_EQ(plan->first_logit_pos, 256);
  EXPECT_EQ(plan->scored_per_window, 255);
  EXPECT_EQ(PlanPerplexity(156030, {1024, 0, 40})->n_windows, 40);
}

TEST(PlanPerplexityTest, SlidingWindowsTileTheText) {
  auto plan = PlanPerplexity(2000, {1024, 512, 0});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->n_windows, 2);  // windows [0,1024) and [512,1536); [1024,2048) does not fit
  EXPECT_EQ(plan->first_logit_pos, 511);
  EXPECT_EQ(plan->scored_per_window, 512);
}

TEST(PlanPerplexityTest, RejectsBadOptions) {
  EXPECT_FALSE(PlanPerplexity(100, {512, 0, 0}).ok());    // shorter than a window
  EXPECT_FALSE(PlanPerplexity(5000, {512, 512, 0}).ok());  // stride must be < ctx
  EXPECT_FALSE(PlanPerplexity(5000, {2, 0, 0}).ok());
  EXPECT_FALSE(PlanPerplexity(5000, {512, -1, 0}).ok());
}

Result<PplResult> RunOnBundledModel(engine::KvType kv, const PplOptions& options,
                                    std::optional<engine::KvType> slot = std::nullopt) {
  AGENTKV_ASSIGN_OR_RETURN(auto model, engine::Model::Load(engine::testing::BundledModelPath()));
  engine::ContextOptions co;
  co.n_slots = 1;
  co.slot_ctx = options.n_ctx;
  co.n_batch = options.n_ctx;
  co.type_k = co.type_v = kv;
  co.slot_type_k = co.slot_type_v = slot;
  AGENTKV_ASSIGN_OR_RETURN(auto ctx, engine::Context::Create(*model, co));
  engine::Tokenizer tokenizer(*model);
  const auto tokens = tokenizer.Tokenize(engine::testing::SampleText(16000), true).tokens;
  return EvaluatePerplexity(*ctx, tokens, tokenizer.Bos(), options);
}

TEST(EvaluatePerplexityTest, BundledModelQ4IsCloseToF16) {
  const PplOptions options{256, 0, 6};
  auto f16 = RunOnBundledModel(engine::KvType::kF16, options);
  ASSERT_TRUE(f16.ok()) << f16.status().ToString();
  auto q4 = RunOnBundledModel(engine::KvType::kQ4_0, options);
  ASSERT_TRUE(q4.ok()) << q4.status().ToString();
  for (const auto* r : {&*f16, &*q4}) {
    EXPECT_TRUE(std::isfinite(r->ppl));
    EXPECT_GT(r->ppl, 1.0);
    EXPECT_LT(r->ppl, 32000.0);
    EXPECT_EQ(r->n_scored, 6 * 127);
    EXPECT_GT(r->ppl_error, 0.0);
  }
  EXPECT_LT(std::abs(q4->ppl / f16->ppl - 1.0), 0.02) << "f16 " << f16->ppl << " q4_0 " << q4->ppl;
}

// Hybrid slots: each window's context goes through q4_0 blocks and back
// before the scored half is decoded in f16. Close to f16 (the round trip
// changes something: not bit-identical), top-1 mostly f16's.
TEST(EvaluatePerplexityTest, HybridContextRoundTripIsCloseToF16) {
  PplOptions options{256, 0, 6};
  options.round_trip_context = true;
  auto f16 = RunOnBundledModel(engine::KvType::kF16, options);
  ASSERT_TRUE(f16.ok()) << f16.status().ToString();
  auto hybrid = RunOnBundledModel(engine::KvType::kQ4_0, options, engine::KvType::kF16);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status().ToString();
  EXPECT_EQ(hybrid->n_scored, 6 * 127);
  ASSERT_EQ(hybrid->top1.size(), static_cast<size_t>(hybrid->n_scored));
  ASSERT_EQ(f16->top1.size(), hybrid->top1.size());
  EXPECT_NE(hybrid->mean_nll, f16->mean_nll);
  EXPECT_LT(std::abs(hybrid->ppl / f16->ppl - 1.0), 0.02) << "f16 " << f16->ppl << " hybrid " << hybrid->ppl;
  const double agree = Top1Agreement(hybrid->top1, f16->top1);
  EXPECT_GT(agree, 0.9);
  EXPECT_LT(agree, 1.0 + 1e-12);
  EXPECT_EQ(Top1Agreement(f16->top1, f16->top1), 1.0);
  EXPECT_EQ(Top1Agreement({}, {}), 0.0);
}

TEST(EvaluatePerplexityTest, SlidingWindowsScoreStrideTokensEach) {
  auto r = RunOnBundledModel(engine::KvType::kQ4_0, {256, 128, 3});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->n_scored, 3 * 128);
  EXPECT_TRUE(std::isfinite(r->ppl));
  EXPECT_GT(r->ppl, 1.0);
}

}  // namespace
}  // namespace agentkv::bench
