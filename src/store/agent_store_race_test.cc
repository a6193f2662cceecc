// A load reads its files without the store's lock (agent_store.h): a save or
// an erasure of the same agent can run while it reads. With the load held at
// a gated file system until the save or erasure has returned (so the race is
// forced, not hoped for), the load answers as the contract says: NotFound
// once erased; the version whose manifest it read, up to a block the save
// collected; and nothing is counted or quarantined as damage.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "store/agent_store.h"
#include "store/gated_file_system_test_util.h"
#include "store/mem_file_system.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT

constexpr auto kGiveUp = std::chrono::seconds(10);

// Tells when the load decoded its manifest (the record it will return).
class RecordSeen final : public LoadObserver {
 public:
  void OnPlan(uint32_t, std::span<const BlockRef>) override {}
  void OnBlockRead(uint32_t, const KvBlock&) override {}
  void OnRecord(const AgentRecord&) override { seen_.set_value(); }
  bool Wait() { return future_.wait_for(kGiveUp) == std::future_status::ready; }

 private:
  std::promise<void> seen_;
  std::future<void> future_ = seen_.get_future();
};

bool WaitHeld(GatedFileSystem& fs) {
  for (int i = 0; i < 1000 && fs.held() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return fs.held() > 0;
}

class AgentStoreRaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = AgentStore::Open(Options(&gated_));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    ASSERT_TRUE(Save(store_.get(), "team", "a", v1_).ok());
  }
  // Starts a load of "a" whose block files are held at the gate after its
  // manifest (v1) was read and decoded.
  std::future<Result<LoadedAgent>> StartHeldLoad() {
    gated_.Close("/blocks/", "");
    auto load = std::async(std::launch::async, [this] { return store_->LoadBlocks("team", "a", 0, &seen_); });
    EXPECT_TRUE(seen_.Wait()) << "the load never read its manifest";
    EXPECT_TRUE(WaitHeld(gated_)) << "the load's block reads were never held";
    return load;
  }
  void ExpectNoDamageCounted() {
    const StoreStats st = store_->stats();
    EXPECT_EQ(st.missing_blocks, 0u);
    EXPECT_EQ(st.corrupt_blocks, 0u);
    EXPECT_EQ(st.corrupt_manifests, 0u);
    EXPECT_EQ(CountFiles(mem_, "/quarantine/"), 0u);
  }

  // A listing of "team", a summary of its agent "b" and a load of "b",
  // started at once on threads of their own (while something is held).
  struct IndexCalls {
    std::future<Result<std::vector<AgentSummary>>> listed;
    std::future<Result<AgentSummary>> summary;
    std::future<Result<LoadedAgent>> loaded;
    // All three returned within kGiveUp.
    bool Answered() {
      return listed.wait_for(kGiveUp) == std::future_status::ready &&
             summary.wait_for(kGiveUp) == std::future_status::ready &&
             loaded.wait_for(kGiveUp) == std::future_status::ready;
    }
  };
  IndexCalls StartIndexCallsOnB() {
    return {std::async(std::launch::async, [this] { return store_->ListAgents("team"); }),
            std::async(std::launch::async, [this] { return store_->GetSummary("team", "b"); }),
            std::async(std::launch::async, [this] { return store_->LoadBlocks("team", "b"); })};
  }

  MemFileSystem mem_;
  GatedFileSystem gated_{&mem_};
  std::unique_ptr<AgentStore> store_;
  RecordSeen seen_;
  const std::vector<int32_t> v1_ = MakeTokens(600, 1);  // blocks 0, 1 full, 2 partial
};

TEST_F(AgentStoreRaceTest, ALoadOfAnAgentErasedWhileItReadsIsNotFound) {
  auto load = StartHeldLoad();
  EXPECT_TRUE(store_->DeleteAgent("team", "a").ok());  // answers: the load holds no lock
  EXPECT_GT(gated_.held(), 0) << "the load was held all along";
  gated_.Open();
  auto loaded = load.get();
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound) << loaded.status().ToString();
  ExpectNoDamageCounted();
  EXPECT_EQ(store_->LoadBlocks("team", "a").status().code(), StatusCode::kNotFound);
}

// v2 keeps v1's first block and diverges after it: the save collects v1's
// blocks 1 and 2 while the v1 load waits to read them.
TEST_F(AgentStoreRaceTest, ALoadOverlappingASaveReturnsItsVersionUpToACollectedBlock) {
  const std::vector<int32_t> v2 = MakeTokens(700, 2, /*n_shared=*/0);
  std::vector<int32_t> v2_shared(v1_.begin(), v1_.begin() + kBlockTokens);
  v2_shared.insert(v2_shared.end(), v2.begin(), v2.end());
  auto load = StartHeldLoad();
  ASSERT_TRUE(Save(store_.get(), "team", "a", v2_shared).ok());
  EXPECT_GT(gated_.held(), 0) << "the load was held all along";
  gated_.Open();
  auto loaded = load.get();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->record.tokens, v1_) << "the version whose manifest the load read";
  EXPECT_FALSE(loaded->complete);
  ASSERT_EQ(loaded->blocks.size(), 1u);
  EXPECT_TRUE(loaded->blocks[0] == MakeBlock(v1_, 0));
  EXPECT_EQ(loaded->valid_tokens, kBlockTokens);
  EXPECT_EQ(loaded->stop_reason.code(), StatusCode::kUnavailable) << loaded->stop_reason.ToString();
  ExpectNoDamageCounted();
  EXPECT_TRUE(LoadsExactly(store_.get(), "team", "a", v2_shared));
}

// Held at its manifest instead: the save lands first, so the load returns
// the new version whole (the blocks it read ahead from the old index that
// the new manifest does not name are read again, in order).
TEST_F(AgentStoreRaceTest, ALoadWhoseManifestIsReadAfterASaveReturnsTheNewVersion) {
  const std::vector<int32_t> v2 = MakeTokens(900, 3);
  gated_.Close("/agents/", "");
  auto load = std::async(std::launch::async, [this] { return store_->LoadBlocks("team", "a"); });
  ASSERT_TRUE(WaitHeld(gated_));
  ASSERT_TRUE(Save(store_.get(), "team", "a", v2).ok());
  gated_.Open();
  auto loaded = load.get();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->record.tokens, v2);
  EXPECT_TRUE(loaded->complete) << loaded->stop_reason.ToString();
  ASSERT_EQ(loaded->blocks.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(loaded->blocks[i] == MakeBlock(v2, i)) << i;
  ExpectNoDamageCounted();
}

// A save's manifest write and its fsyncs run without the store's lock: with
// a save held at the gate as it creates its manifest's temp file (its block
// files written and the blocks directory synced), the index answers (a
// listing, a summary) and another agent loads whole. (Before, the lock was
// held across the manifest's write, fsync and rename: both waited for it.)
TEST_F(AgentStoreRaceTest, ASaveHeldAtItsManifestHoldsUpNoListingOrLoad) {
  const std::vector<int32_t> b = MakeTokens(500, 4);
  ASSERT_TRUE(Save(store_.get(), "team", "b", b).ok());
  const std::vector<int32_t> v2 = MakeTokens(900, 5);
  gated_.Close("", "/agents/");
  auto save = std::async(std::launch::async, [&] { return Save(store_.get(), "team", "a", v2); });
  ASSERT_TRUE(WaitHeld(gated_)) << "the save never reached its manifest";
  IndexCalls calls = StartIndexCallsOnB();
  const bool answered = calls.Answered();
  const int held = gated_.held();
  gated_.Open();
  ASSERT_TRUE(save.get().ok());
  EXPECT_TRUE(answered) << "a listing, a summary or a load waited for the held save";
  EXPECT_GT(held, 0) << "the save was held all along";
  auto list = calls.listed.get();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->size(), 2u);
  EXPECT_TRUE(calls.summary.get().ok());
  auto load_b = calls.loaded.get();
  ASSERT_TRUE(load_b.ok()) << load_b.status().ToString();
  EXPECT_TRUE(load_b->complete);
  EXPECT_EQ(load_b->record.tokens, b);
  EXPECT_TRUE(LoadsExactly(store_.get(), "team", "a", v2));
  ExpectNoDamageCounted();
}

// A deletion held at the gate as it unlinks the agent's block files (its
// manifest already removed, its blocks out of the index): the index answers
// and another agent loads whole. (Before, the lock was held across the
// unlinks and the blocks directory's fsync: both waited for them.) Once the
// deletion returns, its block files are gone and the other agent's are not.
TEST_F(AgentStoreRaceTest, ADeletionHeldAtItsBlockUnlinksHoldsUpNoListingOrLoad) {
  const std::vector<int32_t> b = MakeTokens(500, 4);
  ASSERT_TRUE(Save(store_.get(), "team", "b", b).ok());
  const size_t blocks_before = CountFiles(mem_, "/blocks/");
  gated_.Close("", "", "/blocks/");
  auto erased = std::async(std::launch::async, [this] { return store_->DeleteAgent("team", "a"); });
  ASSERT_TRUE(WaitHeld(gated_)) << "the deletion never reached its block files";
  IndexCalls calls = StartIndexCallsOnB();
  const bool answered = calls.Answered();
  const int held = gated_.held();
  gated_.Open();
  Status st = erased.get();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(answered) << "a listing, a summary or a load waited for the held deletion";
  EXPECT_GT(held, 0) << "the deletion was held all along";
  auto list = calls.listed.get();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->size(), 1u);  // "a" left the index before its files went
  auto load_b = calls.loaded.get();
  ASSERT_TRUE(load_b.ok()) << load_b.status().ToString();
  EXPECT_TRUE(load_b->complete);
  EXPECT_EQ(load_b->record.tokens, b);
  EXPECT_EQ(store_->LoadBlocks("team", "a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(CountFiles(mem_, "/blocks/"), blocks_before - 3);  // v1_'s three blocks, none of b's
  EXPECT_TRUE(LoadsExactly(store_.get(), "team", "b", b));
  ExpectNoDamageCounted();
}

}  // namespace
}  // namespace agentkv
