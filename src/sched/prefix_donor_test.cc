#include "sched/prefix_donor.h"

#include <gtest/gtest.h>

#include <vector>

namespace agentkv::sched {
namespace {

using Kind = DonorChoice::Kind;
constexpr size_t kMin = kMinSharedPrefixBytes;

TEST(PrefixDonorTest, NoDonorBelowTheMinimumShare) {
  EXPECT_EQ(ChooseDonor(0, std::nullopt, {}).kind, Kind::kNone);
  EXPECT_EQ(ChooseDonor(0, IdleDonor{kMin - 1, 5000, true}, {}).kind, Kind::kNone);
  EXPECT_EQ(ChooseDonor(0, IdleDonor{kMin, 5000, true}, {}).kind, Kind::kIdle);
  const std::vector<Leader> leaders{{kMin - 1, kMin, true}};
  EXPECT_EQ(ChooseDonor(0, std::nullopt, leaders).kind, Kind::kNone);
}

TEST(PrefixDonorTest, ADonorMustBeatTheAgentsOwnCacheByTheMinimum) {
  EXPECT_EQ(ChooseDonor(3000, IdleDonor{3000 + kMin - 1, 9000, true}, {}).kind, Kind::kNone);
  const DonorChoice c = ChooseDonor(3000, IdleDonor{3000 + kMin, 9000, true}, {});
  EXPECT_EQ(c.kind, Kind::kIdle);
  EXPECT_EQ(c.common_bytes, 3000 + kMin);
}

TEST(PrefixDonorTest, ADiskOnlyDonorMustShareAQuarterOfItsText) {
  EXPECT_EQ(ChooseDonor(0, IdleDonor{2000, 8001, false}, {}).kind, Kind::kNone) << "reading 8K to reuse 2K";
  EXPECT_EQ(ChooseDonor(0, IdleDonor{2000, 8000, false}, {}).kind, Kind::kIdle);
  EXPECT_EQ(ChooseDonor(0, IdleDonor{2000, 80000, true}, {}).kind, Kind::kIdle) << "in RAM: no read";
}

TEST(PrefixDonorTest, TheLongestLeaderIsCopiedOnceItComputedTheCommonPrefix) {
  const std::vector<Leader> leaders{{2000, 5000, false}, {4000, 3999, false}, {3000, 0, true}};
  DonorChoice c = ChooseDonor(0, std::nullopt, leaders);
  EXPECT_EQ(c.kind, Kind::kWaitForLeader) << "leader 1 shares the most and has not computed it yet";
  EXPECT_EQ(c.leader, 1u);
  EXPECT_EQ(c.common_bytes, 4000u);
  const std::vector<Leader> ready{{2000, 5000, false}, {4000, 4000, false}, {3000, 0, true}};
  c = ChooseDonor(0, std::nullopt, ready);
  EXPECT_EQ(c.kind, Kind::kLeader);
  EXPECT_EQ(c.leader, 1u);
}

TEST(PrefixDonorTest, TheIdleDonorWinsTiesAndSmallLeads) {
  const std::vector<Leader> tie{{3000, 3000, false}};
  EXPECT_EQ(ChooseDonor(0, IdleDonor{3000, 3000, true}, tie).kind, Kind::kIdle);
  const std::vector<Leader> small_lead{{3000 + kMin - 1, 0, false}};
  EXPECT_EQ(ChooseDonor(0, IdleDonor{3000, 3000, true}, small_lead).kind, Kind::kIdle)
      << "not worth waiting for under kMin more";
  const std::vector<Leader> ready_small_lead{{3001, 3001, false}};
  EXPECT_EQ(ChooseDonor(0, IdleDonor{3000, 3000, true}, ready_small_lead).kind, Kind::kLeader)
      << "a ready leader that shares more is copied now";
  const std::vector<Leader> big_lead{{3000 + kMin, 0, false}};
  EXPECT_EQ(ChooseDonor(0, IdleDonor{3000, 3000, true}, big_lead).kind, Kind::kWaitForLeader);
}

}  // namespace
}  // namespace agentkv::sched
