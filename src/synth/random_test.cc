#include "synth/random.h"

#include <cmath>

#include <gtest/gtest.h>

namespace agentkv::synth {
namespace {

TEST(Xoshiro256Test, SameSeedSameStream) {
  Xoshiro256 a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    EXPECT_NE(x, c.Next());
  }
}

TEST(Xoshiro256Test, NormalishHasUnitVarianceAndIsBounded) {
  Xoshiro256 rng(7);
  constexpr int kN = 1 << 20;
  double sum = 0, sum_sq = 0;
  float max_abs = 0;
  for (int i = 0; i < kN; ++i) {
    const float x = rng.NextNormalish();
    sum += x;
    sum_sq += double{x} * x;
    max_abs = std::max(max_abs, std::fabs(x));
  }
  const double mean = sum / kN;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / kN - mean * mean, 1.0, 0.01);
  EXPECT_LT(max_abs, 3.47f);
}

}  // namespace
}  // namespace agentkv::synth
