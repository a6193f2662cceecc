#include "api/parse_budget.h"

#include <gtest/gtest.h>

namespace agentkv::api {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(ParseBudgetTest, BigBodiesShareTheBound) {
  ParseBudget budget(64 * kMiB);
  std::shared_ptr<void> a = budget.Acquire(32 * kMiB);
  std::shared_ptr<void> b = budget.Acquire(32 * kMiB);
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_EQ(budget.in_use(), 64 * kMiB);
  EXPECT_FALSE(budget.Acquire(32 * kMiB));  // a third would exceed it
  EXPECT_FALSE(budget.Acquire(ParseBudget::kAlwaysAdmittedBytes + 1));
  a.reset();
  EXPECT_EQ(budget.in_use(), 32 * kMiB);
  EXPECT_TRUE(budget.Acquire(32 * kMiB));
}

TEST(ParseBudgetTest, SmallBodiesAndALoneBodyAreAlwaysAdmitted) {
  ParseBudget budget(1 * kMiB);
  std::shared_ptr<void> big = budget.Acquire(8 * kMiB);  // nothing else parsing
  ASSERT_TRUE(big);
  std::shared_ptr<void> small = budget.Acquire(ParseBudget::kAlwaysAdmittedBytes);
  ASSERT_TRUE(small);
  EXPECT_EQ(budget.in_use(), 8 * kMiB + ParseBudget::kAlwaysAdmittedBytes);
  EXPECT_FALSE(budget.Acquire(2 * kMiB));
  big.reset();
  small.reset();
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST(ParseBudgetTest, ZeroIsUnbounded) {
  ParseBudget budget(0);
  std::shared_ptr<void> a = budget.Acquire(1000 * kMiB);
  EXPECT_TRUE(budget.Acquire(1000 * kMiB));
}

}  // namespace
}  // namespace agentkv::api
