#include "util/warm_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "util/parallel.h"

namespace agentkv {
namespace {

// Sizes no other test in this binary asks for (the reserve is process-wide).
constexpr size_t kBig = (1 << 20) + 4096 * 3;
constexpr size_t kOther = (256 << 10) + 4096;

// Pages of [p, p + bytes) that are mapped in RAM (mincore), counting whole
// pages inside the range only. Mapped pages do not fault when written.
size_t ResidentPages(void* p, size_t bytes, size_t* pages_in_range) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  std::vector<unsigned char> in_core((end - begin) / page);
  *pages_in_range = in_core.size();
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, in_core.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : in_core) n += c & 1;
  return n;
}

TEST(WarmMemoryTest, HoldsOnlyWhatTheTargetsAskAndHandsOutExactSizes) {
  WarmMemory m;  // its destructor frees what the test leaves held
  m.SetTargets({{kBig, 3}, {kOther, 1}, {1024, 5}});  // 1 KiB: below kMinBytes, ignored
  EXPECT_EQ(m.TargetBytes(), 3 * kBig + kOther);
  m.FillShare(0, 1);
  EXPECT_EQ(m.HeldBytes(), 3 * kBig + kOther);

  const uint64_t taken_before = m.TakenBytes();
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
  EXPECT_EQ(m.TakenBytes() - taken_before, 3 * kBig);

  // Given back up to the target; the fourth is the caller's to free.
  void* fresh = ::operator new(kBig);
  for (void* p : taken) EXPECT_TRUE(m.Give(p, kBig));
  EXPECT_FALSE(m.Give(fresh, kBig));
  ::operator delete(fresh);
  unsigned char small[16];
  EXPECT_FALSE(m.Give(small, 1024));  // below kMinBytes: never held
  EXPECT_EQ(m.HeldBytes(), 3 * kBig + kOther);

  // A smaller target frees what it no longer wants.
  m.SetTargets({{kBig, 1}});
  EXPECT_EQ(m.HeldBytes(), kBig);
  EXPECT_EQ(m.TargetBytes(), kBig);
}

TEST(WarmMemoryTest, SharesFillEveryTargetOnceAndTakenBuffersDoNotFault) {
  WarmMemory m;  // its destructor frees what the test leaves held
  constexpr size_t kCount = 37;
  m.SetTargets({{kBig, kCount}});
  ParallelFor(5, 5, [&](size_t share) { m.FillShare(share, 5); });
  EXPECT_EQ(m.HeldBytes(), kCount * kBig);
  m.FillShare(0, 1);  // nothing lacks: nothing more
  EXPECT_EQ(m.HeldBytes(), kCount * kBig);

  // Every page of a held buffer is already mapped: writing it faults on
  // none (mincore rather than a fault count, which sanitizers' shadow
  // memory would inflate).
  for (int i = 0; i < 3; ++i) {
    void* p = m.Take(kBig);
    ASSERT_NE(p, nullptr);
    size_t pages = 0;
    EXPECT_EQ(ResidentPages(p, kBig, &pages), pages);
    EXPECT_GT(pages, 250u);
    EXPECT_TRUE(m.Give(p, kBig));
  }
}

TEST(WarmMemoryTest, ConcurrentTakeAndGiveKeepTheCount) {
  WarmMemory m;  // its destructor frees what the test leaves held
  m.SetTargets({{kOther, 8}});
  m.FillShare(0, 1);
  ParallelFor(4, 4, [&](size_t) {
    for (int round = 0; round < 200; ++round) {
      void* p = m.Take(kOther);
      if (p == nullptr) p = ::operator new(kOther);
      static_cast<unsigned char*>(p)[0] = 1;
      if (!m.Give(p, kOther)) ::operator delete(p);
    }
  });
  EXPECT_EQ(m.HeldBytes(), 8 * kOther);
}

}  // namespace
}  // namespace agentkv
