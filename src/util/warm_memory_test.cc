#include "util/warm_memory.h"

#include <sys/resource.h>

#include <cstring>
#include <new>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "util/parallel.h"

namespace agentkv {
namespace {

// Sizes no other test in this binary asks for (the reserve is process-wide).
constexpr size_t kBig = (1 << 20) + 4096 * 3;
constexpr size_t kOther = (256 << 10) + 4096;

long MinorFaults() {
  rusage r{};
  ::getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt;
}

class WarmMemoryTest : public ::testing::Test {
 protected:
  void TearDown() override { WarmMemory::Get().SetTargets({}); }  // frees what the test left held
};

TEST_F(WarmMemoryTest, HoldsOnlyWhatTheTargetsAskAndHandsOutExactSizes) {
  WarmMemory& m = WarmMemory::Get();
  m.SetTargets({{kBig, 3}, {kOther, 1}, {1024, 5}});  // 1 KiB: below kMinBytes, ignored
  EXPECT_EQ(m.TargetBytes(), 3 * kBig + kOther);
  m.FillShare(0, 1);
  EXPECT_EQ(m.HeldBytes(), 3 * kBig + kOther);

  EXPECT_EQ(m.Take(kBig + 1), nullptr);  // no such size held
  EXPECT_EQ(m.Take(1024), nullptr);
  std::set<void*> taken;
  for (int i = 0; i < 3; ++i) {
    void* p = m.Take(kBig);
    ASSERT_NE(p, nullptr);
    taken.insert(p);
  }
  EXPECT_EQ(taken.size(), 3u);
  EXPECT_EQ(m.Take(kBig), nullptr);  // all three handed out
  EXPECT_EQ(m.HeldBytes(), kOther);

  // Given back up to the target; the fourth is the caller's to free.
  void* fresh = ::operator new(kBig);
  for (void* p : taken) EXPECT_TRUE(m.Give(p, kBig));
  EXPECT_FALSE(m.Give(fresh, kBig));
  ::operator delete(fresh, kBig);
  unsigned char small[16];
  EXPECT_FALSE(m.Give(small, 1024));  // below kMinBytes: never held
  EXPECT_EQ(m.HeldBytes(), 3 * kBig + kOther);

  // A smaller target frees what it no longer wants.
  m.SetTargets({{kBig, 1}});
  EXPECT_EQ(m.HeldBytes(), kBig);
  EXPECT_EQ(m.TargetBytes(), kBig);
}

TEST_F(WarmMemoryTest, SharesFillEveryTargetOnceAndTakenBuffersDoNotFault) {
  WarmMemory& m = WarmMemory::Get();
  constexpr size_t kCount = 37;
  m.SetTargets({{kBig, kCount}});
  ParallelFor(5, 5, [&](size_t share) { m.FillShare(share, 5); });
  EXPECT_EQ(m.HeldBytes(), kCount * kBig);
  m.FillShare(0, 1);  // nothing lacks: nothing more
  EXPECT_EQ(m.HeldBytes(), kCount * kBig);

  // Writing all of a held buffer maps no new page (fresh memory of this size
  // would fault ~256 times; allow a few for the test's own bookkeeping).
  void* p = m.Take(kBig);
  ASSERT_NE(p, nullptr);
  const long before = MinorFaults();
  std::memset(p, 0x5a, kBig);
  EXPECT_LT(MinorFaults() - before, 16);
  EXPECT_TRUE(m.Give(p, kBig));
}

TEST_F(WarmMemoryTest, ConcurrentTakeAndGiveKeepTheCount) {
  WarmMemory& m = WarmMemory::Get();
  m.SetTargets({{kOther, 8}});
  m.FillShare(0, 1);
  ParallelFor(4, 4, [&](size_t) {
    for (int round = 0; round < 200; ++round) {
      void* p = m.Take(kOther);
      if (p == nullptr) p = ::operator new(kOther);
      static_cast<unsigned char*>(p)[0] = 1;
      if (!m.Give(p, kOther)) ::operator delete(p, kOther);
    }
  });
  EXPECT_EQ(m.HeldBytes(), 8 * kOther);
}

}  // namespace
}  // namespace agentkv
