#include "engine/token_logprobs.h"

#include <cmath>

#include <gtest/gtest.h>

namespace agentkv::engine {
namespace {

TEST(TokenLogprobsTest, LogSoftmaxOfTheRawLogits) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  const TokenLogprobs lp = ComputeTokenLogprobs(logits, 2, 3);
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(lp.logprob, 2.0 - z, 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // the tie of 1 and 3 goes to the lower id
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_NEAR(lp.top[0].second, 3.0 - z, 1e-6);
  double total = 0;
  for (float x : logits) total += std::exp(double(x) - z);
  EXPECT_NEAR(total, 1.0, 1e-9);
}

TEST(TokenLogprobsTest, LargeLogitsDoNotOverflowAndKIsCapped) {
  const std::vector<float> logits = {1000.0f, 999.0f};
  const TokenLogprobs lp = ComputeTokenLogprobs(logits, 0, 5);
  EXPECT_TRUE(std::isfinite(lp.logprob));
  EXPECT_NEAR(lp.logprob, -std::log1p(std::exp(-1.0)), 1e-5);
  EXPECT_EQ(lp.top.size(), 2u);
  EXPECT_TRUE(ComputeTokenLogprobs(logits, 1, 0).top.empty());
}

}  // namespace
}  // namespace agentkv::engine
