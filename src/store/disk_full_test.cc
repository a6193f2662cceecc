// A disk that fills up (FaultInjectingFileSystem::SetCapacityBytes: deleting
// files makes room, as on a real one) and a disk that answers EIO: saves make
// room by evicting the least recently used agents, a failed save leaves
// nothing behind, and nothing corrupt is ever loaded.
#include <gtest/gtest.h>

#include "store/agent_store.h"
#include "store/durable_io.h"
#include "store/fault_file_system.h"
#include "store/mem_file_system.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;

struct Disk {
  MemFileSystem mem;
  FaultInjectingFileSystem fault{&mem};
  std::unique_ptr<AgentStore> store;
  int64_t clock = 1000;

  void Open(uint64_t budget = 0) {
    AgentStoreOptions o = Options(&fault);
    o.now_ms = [this] { return ++clock; };
    o.disk_budget_bytes = budget;
    auto s = AgentStore::Open(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store = std::move(s).value();
  }
  Result<SaveResult> Save(const std::string& id, const std::vector<int32_t>& tokens) {
    return store->SaveAgent("ns", MakeRecord(id, tokens), ProviderFor(tokens));
  }
  size_t TempFiles() { return CountFiles(mem, ".tmp"); }
};

// Bytes one agent of `n` tokens takes on disk (blocks + manifest).
uint64_t AgentBytes(size_t n, uint32_t seed) {
  Disk d;
  d.Open();
  auto r = d.Save("x", MakeTokens(n, seed));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->bytes_written : 0;
}

TEST(DiskFullTest, IsNoSpaceRecognizesEnospcAndEdquotOnly) {
  EXPECT_TRUE(IsNoSpace(Status::IOError("write /c/x.tmp: No space left on device")));
  EXPECT_TRUE(IsNoSpace(Status::IOError("write /c/x.tmp: Disk quota exceeded")));
  EXPECT_FALSE(IsNoSpace(Status::IOError("read /c/x: Input/output error")));
  EXPECT_FALSE(IsNoSpace(Status::Internal("No space left on device")));  // not the OS's word
}

// Room for about two agents and no budget: the third save evicts the least
// recently used one (a), and every agent left loads exactly.
TEST(DiskFullTest, ASaveOutOfSpaceEvictsTheLeastRecentlyUsedAgent) {
  const uint64_t one = AgentBytes(700, 1);
  ASSERT_GT(one, 1000u);
  Disk d;
  d.Open();
  d.fault.SetCapacityBytes(2 * one + one / 2);
  ASSERT_TRUE(d.Save("a", MakeTokens(700, 1)).ok());
  ASSERT_TRUE(d.Save("b", MakeTokens(700, 2)).ok());
  ASSERT_TRUE(d.store->GetRecord("ns", "b").ok());  // b used after a
  auto c = d.Save("c", MakeTokens(700, 3));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->agents_evicted, 1u);
  EXPECT_EQ(d.store->GetRecord("ns", "a").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(LoadsExactly(d.store.get(), "ns", "b", MakeTokens(700, 2)));
  EXPECT_TRUE(LoadsExactly(d.store.get(), "ns", "c", MakeTokens(700, 3)));
  const StoreStats st = d.store->stats();
  EXPECT_GE(st.saves_out_of_space, 1u);
  EXPECT_EQ(st.agents_evicted_for_space, 1u);
  EXPECT_EQ(d.TempFiles(), 0u);
  EXPECT_LE(d.fault.used_bytes(), 2 * one + one / 2);
  // A restart finds exactly b and c, nothing to clean.
  d.store.reset();
  d.Open();
  auto list = d.store->ListAgents("ns");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ(d.store->stats().orphan_blocks_removed, 0u);
  EXPECT_EQ(d.store->stats().temp_files_removed, 0u);
}

// An agent larger than the whole disk: every other agent is evicted, the save
// still fails (ENOSPC), the agent's previous version stays loadable, and
// what the failed attempts wrote is removed before the next save.
TEST(DiskFullTest, AnAgentLargerThanTheDiskFailsCleanly) {
  const uint64_t small = AgentBytes(300, 1);
  Disk d;
  d.Open();
  d.fault.SetCapacityBytes(3 * small);
  ASSERT_TRUE(d.Save("big", MakeTokens(300, 9)).ok());
  ASSERT_TRUE(d.Save("other", MakeTokens(300, 2)).ok());
  auto big = MakeTokens(300, 9);
  for (int i = 0; i < 2000; ++i) big.push_back(100 + i);  // ~8x the room
  auto r = d.Save("big", big);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsNoSpace(r.status())) << r.status().ToString();
  EXPECT_TRUE(LoadsExactly(d.store.get(), "ns", "big", MakeTokens(300, 9)));
  EXPECT_EQ(d.store->GetRecord("ns", "other").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.TempFiles(), 0u);
  // A save that fits works again, in the space the failed attempts left.
  ASSERT_TRUE(d.Save("other", MakeTokens(300, 2)).ok());
  EXPECT_TRUE(LoadsExactly(d.store.get(), "ns", "other", MakeTokens(300, 2)));
  EXPECT_LE(d.fault.used_bytes(), 3 * small);
}

// The disk budget (smaller than the disk) still governs when the disk does
// not fill: no out-of-space eviction happens.
TEST(DiskFullTest, ABudgetBelowTheDiskNeverRunsOutOfSpace) {
  const uint64_t one = AgentBytes(700, 1);
  Disk d;
  d.Open(/*budget=*/2 * one + one / 2);
  d.fault.SetCapacityBytes(4 * one);
  for (uint32_t i = 0; i < 8; ++i) ASSERT_TRUE(d.Save("a" + std::to_string(i), MakeTokens(700, i + 1)).ok());
  const StoreStats st = d.store->stats();
  EXPECT_EQ(st.saves_out_of_space, 0u);
  EXPECT_EQ(st.agents_evicted_for_space, 0u);
  EXPECT_EQ(st.agents_evicted, 6u);
  EXPECT_LE(st.disk_bytes, 2 * one + one / 2);
}

// EIO on block reads: the load stops at the first unreadable block (a
// shorter valid prefix, never a wrong one) and the file is NOT quarantined:
// an I/O error is not corruption, and once the disk answers the agent loads
// whole again.
TEST(DiskFullTest, EioOnReadsLoadsAPrefixAndQuarantinesNothing) {
  Disk d;
  d.Open();
  const auto tokens = MakeTokens(700, 4);
  ASSERT_TRUE(d.Save("a", tokens).ok());
  d.store.reset();
  d.Open();
  d.fault.FailOps("read", "/blocks/");
  auto r = d.store->LoadBlocks("ns", "a");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->complete);
  EXPECT_EQ(r->valid_tokens, 0u);
  EXPECT_EQ(r->stop_reason.code(), StatusCode::kIOError) << r->stop_reason.ToString();
  EXPECT_EQ(CountFiles(d.mem, "/quarantine/"), 0u);
  EXPECT_EQ(d.store->stats().corrupt_blocks, 0u);
  d.fault.FailOps("", "");
  EXPECT_TRUE(LoadsExactly(d.store.get(), "ns", "a", tokens));
}

// EIO on block writes: the save fails, the agent stays at its old version,
// nothing is left behind, and the next save after the disk recovers lands.
TEST(DiskFullTest, EioOnWritesKeepsTheOldVersion) {
  Disk d;
  d.Open();
  const auto v1 = MakeTokens(600, 5);
  auto v2 = v1;
  for (int i = 0; i < 300; ++i) v2.push_back(50 + i);
  ASSERT_TRUE(d.Save("a", v1).ok());
  d.fault.FailOps("append", "/blocks/");
  auto r = d.Save("a", v2);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(IsNoSpace(r.status()));
  EXPECT_EQ(d.store->stats().agents_evicted, 0u);  // EIO is not a reason to evict
  EXPECT_TRUE(LoadsExactly(d.store.get(), "ns", "a", v1));
  d.fault.FailOps("", "");
  ASSERT_TRUE(d.Save("a", v2).ok());
  EXPECT_TRUE(LoadsExactly(d.store.get(), "ns", "a", v2));
  EXPECT_EQ(d.TempFiles(), 0u);
}

}  // namespace
}  // namespace agentkv
