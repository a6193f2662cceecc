// cache ls|show|verify --remote, on an in-memory remote.
#include "remote/remote_admin.h"

#include <gtest/gtest.h>

#include "remote/mem_remote_store.h"
#include "remote/remote_tier.h"
#include "store/mem_file_system.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;

class RemoteAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(AgentStore::Open(Options(&fs_))).value();
    tier_ = std::make_unique<RemoteTier>(&remote_, kFp, kKvTypes);
  }
  AgentRecord Publish(const std::string& ns, const std::string& id, const std::vector<int32_t>& tokens) {
    auto saved = store_->SaveAgent(ns, MakeRecord(id, tokens), ProviderFor(tokens));
    EXPECT_TRUE(saved.ok());
    std::vector<KvBlock> blocks;
    for (uint32_t i = 0; i < saved->record.blocks.size(); ++i) blocks.push_back(MakeBlock(tokens, i));
    std::vector<const KvBlock*> ptrs;
    for (const auto& b : blocks) ptrs.push_back(&b);
    EXPECT_TRUE(tier_->Push(saved->record, ptrs).ok());
    return saved->record;
  }

  MemFileSystem fs_;
  std::unique_ptr<AgentStore> store_;
  MemRemoteStore remote_;
  std::unique_ptr<RemoteTier> tier_;
};

TEST_F(RemoteAdminTest, ListsAndVerifiesEveryAgentWithoutChangingAnything) {
  Publish("ns-a", "one", MakeTokens(600, 1));
  const AgentRecord two = Publish("ns-b", "two", MakeTokens(300, 2));
  auto all = RemoteCacheList(&remote_, "", "");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->agents.size(), 2u);
  EXPECT_EQ(all->agents[0].record.agent_id, "one");
  EXPECT_EQ(all->agents[1].record.ns, "ns-b");
  EXPECT_TRUE(all->problems.empty());
  auto only_b = RemoteCacheList(&remote_, "ns-b", "");
  ASSERT_TRUE(only_b.ok());
  ASSERT_EQ(only_b->agents.size(), 1u);

  // Block 0 of "two" replaced by garbage.
  const RemoteScope scope{kFp, "ns-b"};
  ASSERT_TRUE(remote_.DeleteBlocks(scope, std::span<const std::string>(&two.blocks[0].id, 1)).ok());
  std::vector<std::pair<std::string, std::string_view>> junk = {{two.blocks[0].id, "not a block file"}};
  ASSERT_TRUE(remote_.PutBlocksIfAbsent(scope, junk).ok());
  auto reports = RemoteCacheVerify(&remote_, "", "");
  ASSERT_TRUE(reports.ok());
  ASSERT_EQ(reports->size(), 2u);
  EXPECT_TRUE((*reports)[0].ok());
  EXPECT_EQ((*reports)[0].valid_tokens, 600u);
  EXPECT_FALSE((*reports)[1].ok());
  EXPECT_EQ((*reports)[1].n_corrupt, 1u);
  EXPECT_EQ((*reports)[1].n_ok, 1u);
  EXPECT_EQ((*reports)[1].valid_tokens, 0u);
  // Read-only: the bad block is still there.
  auto still = remote_.GetBlocks(scope, std::span<const std::string>(&two.blocks[0].id, 1));
  ASSERT_TRUE(still.ok());
  EXPECT_EQ((*still)[0], "not a block file");
}

}  // namespace
}  // namespace agentkv
