// Issue 12: a failed save repairs its own leftovers in O(its agent); the
// namespace is not rescanned (no directory listing, no manifest reads)
// unless the repair itself fails.
#include <gtest/gtest.h>

#include "store/agent_store.h"
#include "store/fault_file_system.h"
#include "store/mem_file_system.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT

class SaveRepairTest : public ::testing::Test {
 protected:
  std::unique_ptr<AgentStore> Open() {
    AgentStoreOptions o = Options(&fault_);
    o.now_ms = [this] { return ++clock_ms_; };
    auto s = AgentStore::Open(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  // A namespace of 40 agents.
  std::unique_ptr<AgentStore> OpenWithAgents() {
    auto store = Open();
    for (uint32_t i = 0; i < 40; ++i) EXPECT_TRUE(Save(store.get(), "ns", "a" + std::to_string(i), MakeTokens(300, i + 1)).ok());
    return store;
  }
  // Reopening rescans everything: it must find nothing left to clean.
  void ExpectNothingLeftBehind(std::unique_ptr<AgentStore>& store) {
    EXPECT_EQ(CountFiles(mem_, ".tmp"), 0u);
    const size_t blocks = CountFiles(mem_, "/blocks/");
    store.reset();
    store = Open();
    EXPECT_EQ(CountFiles(mem_, "/blocks/"), blocks) << "orphan blocks were left";
    EXPECT_EQ(store->stats().orphan_blocks_removed, 0u);
    EXPECT_EQ(store->stats().temp_files_removed, 0u);
  }

  MemFileSystem mem_;
  FaultInjectingFileSystem fault_{&mem_};
  int64_t clock_ms_ = 1000;
};

TEST_F(SaveRepairTest, FailedManifestWriteIsRepairedWithoutARescan) {
  auto store = OpenWithAgents();
  const size_t blocks_before = CountFiles(mem_, "/blocks/");
  fault_.Reset();
  fault_.FailOps("rename", "/agents/");  // the new blocks land, the manifest does not
  EXPECT_FALSE(Save(store.get(), "ns", "a0", MakeTokens(600, 1)).ok());
  fault_.FailOps("", "");
  EXPECT_EQ(CountFiles(mem_, "/blocks/"), blocks_before);  // its new blocks are gone already
  ASSERT_TRUE(Save(store.get(), "ns", "a1", MakeTokens(600, 2)).ok());  // the next save, same namespace
  EXPECT_EQ(fault_.CountOps("list"), 0u) << "a rescan lists the namespace's directories";
  EXPECT_LE(fault_.CountOps("read"), 1u);  // the failed agent's manifest, re-read once
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a0", MakeTokens(300, 1)));  // the old turn is intact
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a1", MakeTokens(600, 2)));
  ExpectNothingLeftBehind(store);
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a0", MakeTokens(300, 1)));
}

TEST_F(SaveRepairTest, FailedFirstSaveOfANewAgentLeavesNothing) {
  auto store = OpenWithAgents();
  fault_.Reset();
  fault_.FailOps("append", "/blocks/");  // a block write fails
  EXPECT_FALSE(Save(store.get(), "ns", "new", MakeTokens(900, 77)).ok());
  fault_.FailOps("", "");
  EXPECT_EQ(store->GetRecord("ns", "new").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(Save(store.get(), "ns", "a2", MakeTokens(600, 3)).ok());
  EXPECT_EQ(fault_.CountOps("list"), 0u);
  ExpectNothingLeftBehind(store);
  EXPECT_EQ(store->ListAgents("ns")->size(), 40u);
}

TEST_F(SaveRepairTest, WhenTheRepairFailsTooTheNamespaceIsRescanned) {
  auto store = OpenWithAgents();
  fault_.Reset();
  // The fsync of agents/ fails for the save and for its repair.
  fault_.FailOps("syncdir", "/agents");
  EXPECT_FALSE(Save(store.get(), "ns", "a3", MakeTokens(600, 4)).ok());
  fault_.FailOps("", "");
  ASSERT_TRUE(Save(store.get(), "ns", "a4", MakeTokens(600, 5)).ok());
  EXPECT_GT(fault_.CountOps("list"), 0u);  // the fallback: a rescan
  // The renamed manifest of a3 is visible: the rescan adopted it.
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a3", MakeTokens(600, 4)));
  ExpectNothingLeftBehind(store);
}

}  // namespace
}  // namespace agentkv
