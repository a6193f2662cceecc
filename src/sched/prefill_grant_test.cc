#include "sched/prefill_grant.h"

#include <gtest/gtest.h>

namespace agentkv::sched {
namespace {

TEST(GrantPrefillTest, NothingWithoutTurnsOrBudget) {
  EXPECT_TRUE(GrantPrefill({}, 512).empty());
  EXPECT_EQ(GrantPrefill({10, 20}, 0), (std::vector<size_t>{0, 0}));
  EXPECT_EQ(GrantPrefill({10, 20}, -3), (std::vector<size_t>{0, 0}));
}

TEST(GrantPrefillTest, ShortestFirstAfterTheOldestsQuarter) {
  // The oldest (1000 left) gets a quarter of 512 first; the short one all it
  // needs; the oldest the rest.
  EXPECT_EQ(GrantPrefill({1000, 30}, 512), (std::vector<size_t>{482, 30}));
  // Three long ones: the oldest's quarter, then shortest first.
  EXPECT_EQ(GrantPrefill({1000, 900, 300}, 512), (std::vector<size_t>{128, 84, 300}));
}

TEST(GrantPrefillTest, EveryoneFitsAndTheOldestGetsAtLeastOneToken) {
  EXPECT_EQ(GrantPrefill({5, 7, 9}, 512), (std::vector<size_t>{5, 7, 9}));
  EXPECT_EQ(GrantPrefill({100, 2}, 3), (std::vector<size_t>{1, 2}));  // budget / 4 == 0: still one
}

TEST(GrantPrefillTest, NeverMoreThanTheBudgetNorThanWhatIsLeft) {
  for (int budget : {1, 2, 7, 64, 513}) {
    const std::vector<size_t> remaining{40, 3, 900, 17, 1};
    const std::vector<size_t> grant = GrantPrefill(remaining, budget);
    size_t sum = 0;
    for (size_t i = 0; i < grant.size(); ++i) {
      EXPECT_LE(grant[i], remaining[i]);
      sum += grant[i];
    }
    EXPECT_LE(sum, static_cast<size_t>(budget));
    EXPECT_GT(grant[0], 0u);  // the oldest always moves
  }
}

}  // namespace
}  // namespace agentkv::sched
