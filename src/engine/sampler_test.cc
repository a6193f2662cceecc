#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace agentkv::engine {
namespace {

// The one-pass argmax Greedy must agree with: first id of the largest value,
// NaN never larger than anything.
int32_t Reference(const std::vector<float>& logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

TEST(SamplerGreedyTest, PicksTheFirstLargestLikeAOnePassArgmax) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);  // few distinct values: many ties
  std::normal_distribution<float> wide;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t n : {size_t{1}, size_t{2}, size_t{15}, size_t{16}, size_t{17}, size_t{33}, size_t{1000}, size_t{32003}}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> logits(n);
      for (float& x : logits) x = trial % 2 ? static_cast<float>(small(rng)) : wide(rng);
      if (trial % 5 == 1) logits[rng() % n] = nan;
      if (trial % 5 == 2) logits[rng() % n] = -inf;
      if (trial % 5 == 3) logits[n - 1] = 100.0f;  // the largest in the tail past the last full lane group
      if (trial % 7 == 4) logits[0] = nan;          // a NaN first: the pick is 0
      if (trial % 9 == 5) {                         // signed zeros tie
        for (float& x : logits) x = -1.0f;
        logits[rng() % n] = -0.0f;
        logits[rng() % n] = 0.0f;
      }
      ASSERT_EQ(Sampler::Greedy(logits), Reference(logits)) << "n " << n << ", trial " << trial;
    }
  }
  EXPECT_EQ(Sampler::Greedy({}), 0);
  const std::vector<float> all_minus_inf(40, -inf);
  EXPECT_EQ(Sampler::Greedy(all_minus_inf), 0);
}

}  // namespace
}  // namespace agentkv::engine
