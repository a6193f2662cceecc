// RemoteTier against a real redis-server: round trips, verification of every
// fetched byte, versions, tenants.
#include "remote/remote_tier.h"

#include <gtest/gtest.h>

#include <functional>

#include "remote/mem_remote_store.h"
#include "remote/redis_remote_store.h"
#include "remote/redis_test_server.h"
#include "store/block_file.h"
#include "store/mem_file_system.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;
using remote_test::RedisTestServer;

class RemoteTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisTestServer::Available()) GTEST_SKIP() << "redis-server not installed";
    ASSERT_TRUE(server_.Start());
    auto o = ParseRedisUrl(server_.url());
    ASSERT_TRUE(o.ok());
    o->retry_after_ms = 50;
    remote_ = std::make_unique<RedisRemoteStore>(*o);
    tier_ = std::make_unique<RemoteTier>(remote_.get(), kFp, kKvTypes);
    auto s = AgentStore::Open(Options(&fs_));
    ASSERT_TRUE(s.ok());
    store_ = std::move(s).value();
  }

  // Saves the agent locally (as a server does) and pushes the saved turn.
  AgentRecord SaveAndPush(const std::string& ns, const std::string& id, const std::vector<int32_t>& tokens,
                          uint64_t version = 0) {
    AgentRecord rec = MakeRecord(id, tokens);
    rec.version = version;
    auto saved = store_->SaveAgent(ns, rec, ProviderFor(tokens));
    EXPECT_TRUE(saved.ok()) << saved.status().ToString();
    std::vector<KvBlock> blocks;
    for (uint32_t i = 0; i < saved->record.blocks.size(); ++i) blocks.push_back(MakeBlock(tokens, i));
    std::vector<const KvBlock*> ptrs;
    for (const auto& b : blocks) ptrs.push_back(&b);
    Status s = tier_->Push(saved->record, ptrs);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return saved->record;
  }

  std::string BlockKey(const std::string& ns, const std::string& id) {
    return RedisRemoteStore::BlockKey({kFp, ns}, id);
  }
  void SetKey(const std::string& key, const std::string& value) {
    redisReply* r = server_.Command({"SET", key, value});
    ASSERT_NE(r, nullptr);
    freeReplyObject(r);
  }
  std::string GetKey(const std::string& key) {
    redisReply* r = server_.Command({"GET", key});
    std::string v = r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
    if (r) freeReplyObject(r);
    return v;
  }

  RedisTestServer server_;
  MemFileSystem fs_;
  std::unique_ptr<AgentStore> store_;
  std::unique_ptr<RedisRemoteStore> remote_;
  std::unique_ptr<RemoteTier> tier_;
};

TEST_F(RemoteTierTest, PushThenFetchReturnsTheSameAgent) {
  const auto tokens = MakeTokens(1000, 1);  // 4 blocks, the last partial
  const AgentRecord saved = SaveAndPush("ns", "agent", tokens);
  auto got = tier_->Fetch("ns", "agent");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->complete);
  EXPECT_EQ(got->valid_tokens, 1000u);
  EXPECT_EQ(got->record, saved);
  ASSERT_EQ(got->blocks.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(got->blocks[i], MakeBlock(tokens, i));
  EXPECT_EQ(tier_->counters().hits.load(), 1u);
  EXPECT_EQ(tier_->counters().blocks_written.load(), 4u);

  // The next turn extends the agent: only the blocks the remote lacks go up.
  auto longer = MakeTokens(1200, 1);
  SaveAndPush("ns", "agent", longer);
  EXPECT_EQ(tier_->counters().blocks_written.load(), 4u + 2u);  // new partial block 3 and block 4
  auto got2 = tier_->Fetch("ns", "agent");
  ASSERT_TRUE(got2.ok());
  EXPECT_EQ(got2->record.tokens, longer);
  EXPECT_TRUE(got2->complete);
}

// Issue 14: the blocks a caller holds (its disk, ReadHeldBlocks) are taken
// from it; only the others are fetched and counted in bytes_read.
TEST_F(RemoteTierTest, FetchBlocksFetchesOnlyWhatIsNotHeld) {
  const auto tokens = MakeTokens(1000, 1);  // 4 blocks
  SaveAndPush("ns", "agent", tokens);
  auto rec = tier_->FetchManifest("ns", "agent");
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  const uint64_t manifest_bytes = tier_->counters().bytes_read.load();
  EXPECT_EQ(tier_->FetchManifest("ns", "agent", rec->version).status().code(), StatusCode::kAlreadyExists);

  auto held = store_->ReadHeldBlocks("ns", *rec);  // the local disk holds them all
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(held->size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE((*held)[i].has_value()) << i;
  held->resize(2);  // pretend only the first two: the last two are fetched
  auto got = tier_->FetchBlocks(*rec, std::move(held).value());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->loaded.complete);
  EXPECT_EQ(got->loaded.valid_tokens, 1000u);
  EXPECT_EQ(got->remote_blocks, 2u);
  ASSERT_EQ(got->loaded.blocks.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(got->loaded.blocks[i], MakeBlock(tokens, i));
  EXPECT_EQ(tier_->counters().local_blocks.load(), 2u);
  const uint64_t two_blocks = tier_->counters().bytes_read.load() - manifest_bytes;
  EXPECT_GT(two_blocks, 0u);

  auto all = tier_->FetchBlocks(*rec);  // nothing held: all four fetched
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->remote_blocks, 4u);
  EXPECT_GT(tier_->counters().bytes_read.load() - manifest_bytes - two_blocks, two_blocks);

  // A record of another agent names blocks this store does not hold: none read.
  auto other = store_->ReadHeldBlocks("other-ns", *rec);
  ASSERT_TRUE(other.ok());
  for (const auto& b : *other) EXPECT_FALSE(b.has_value());
}

TEST_F(RemoteTierTest, UnknownAgentIsAMiss) {
  auto got = tier_->Fetch("ns", "nobody");
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tier_->counters().misses.load(), 1u);
}

TEST_F(RemoteTierTest, OlderVersionDoesNotReplaceNewer) {
  const auto t1 = MakeTokens(300, 1);
  const auto t2 = MakeTokens(600, 1);
  const AgentRecord newer = SaveAndPush("ns", "agent", t2, 2000);
  // A second server that served the agent briefly pushes an older turn.
  MemFileSystem other_fs;
  auto other = AgentStore::Open(Options(&other_fs));
  ASSERT_TRUE(other.ok());
  AgentRecord rec = MakeRecord("agent", t1);
  rec.version = 1500;
  auto saved = (*other)->SaveAgent("ns", rec, ProviderFor(t1));
  ASSERT_TRUE(saved.ok());
  std::vector<KvBlock> blocks = {MakeBlock(t1, 0), MakeBlock(t1, 1)};
  ASSERT_TRUE(tier_->Push(saved->record, {&blocks[0], &blocks[1]}).ok());
  EXPECT_EQ(tier_->counters().stale_manifests.load(), 1u);
  auto got = tier_->Fetch("ns", "agent");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->record.version, 2000u);
  EXPECT_EQ(got->record.tokens, t2);
}

// Each way a remote block can be wrong: the fetch keeps the blocks before it,
// counts it, and never returns it.
TEST_F(RemoteTierTest, BadBlocksAreNeverImported) {
  const auto tokens = MakeTokens(1024, 7);  // 4 full blocks
  const AgentRecord saved = SaveAndPush("ns", "agent", tokens);
  const std::string key2 = BlockKey("ns", saved.blocks[2].id);
  const std::string good = GetKey(key2);
  ASSERT_FALSE(good.empty());

  std::string flipped = good;
  flipped[flipped.size() - 5] ^= 0x01;
  // Same bytes, sealed with another model's fingerprint (a valid file on its own).
  BlockMeta foreign_meta{saved.blocks[2].id, saved.blocks[1].id, "fffffffffffffffffff", kKvTypes, 0};
  auto foreign = EncodeBlockFile(MakeBlock(tokens, 2), foreign_meta);
  ASSERT_TRUE(foreign.ok());
  // Another block of this agent, valid on its own, under block 2's key.
  auto misplaced = GetKey(BlockKey("ns", saved.blocks[3].id));

  struct Case {
    const char* name;
    std::string bytes;
  };
  const std::vector<Case> cases = {{"corrupt", flipped},
                                   {"truncated", good.substr(0, good.size() / 2)},
                                   {"empty", ""},
                                   {"foreign model", *foreign},
                                   {"misplaced", misplaced}};
  uint64_t corrupt = 0;
  for (const auto& c : cases) {
    SetKey(key2, c.bytes);
    auto got = tier_->Fetch("ns", "agent");
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().ToString();
    EXPECT_FALSE(got->complete) << c.name;
    ASSERT_EQ(got->blocks.size(), 2u) << c.name;  // the longest valid prefix
    EXPECT_EQ(got->valid_tokens, 512u) << c.name;
    EXPECT_EQ(got->blocks[1], MakeBlock(tokens, 1)) << c.name;
    EXPECT_EQ(tier_->counters().corrupt_blocks.load(), ++corrupt) << c.name;
    EXPECT_EQ(GetKey(key2), "") << c.name << ": a bad block stays in the remote";
  }
  // The next push of the agent uploads the dropped block again.
  std::vector<KvBlock> blocks;
  for (uint32_t i = 0; i < 4; ++i) blocks.push_back(MakeBlock(tokens, i));
  ASSERT_TRUE(tier_->Push(saved, {&blocks[0], &blocks[1], &blocks[2], &blocks[3]}).ok());
  EXPECT_EQ(GetKey(key2), good);
  // Evicted (absent): a shorter prefix too, counted as missing.
  redisReply* r = server_.Command({"DEL", key2});
  freeReplyObject(r);
  auto got = tier_->Fetch("ns", "agent");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->blocks.size(), 2u);
  EXPECT_EQ(tier_->counters().missing_blocks.load(), 1u);
}

TEST_F(RemoteTierTest, CorruptOrForeignManifestIsRefused) {
  const auto tokens = MakeTokens(300, 3);
  SaveAndPush("ns", "agent", tokens);
  const std::string mkey = RedisRemoteStore::ManifestKey({kFp, "ns"}, "agent");
  redisReply* r = server_.Command({"HGET", mkey, "m"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING);
  std::string m(r->str, r->len);
  freeReplyObject(r);
  m[m.find("\"text\"") + 9] ^= 0x01;
  freeReplyObject(server_.Command({"HSET", mkey, "m", m}));
  auto got = tier_->Fetch("ns", "agent");
  EXPECT_EQ(got.status().code(), StatusCode::kCorruption);
  // Another agent's valid manifest copied under this agent's key.
  SaveAndPush("ns", "agent2", tokens);
  r = server_.Command({"HGETALL", RedisRemoteStore::ManifestKey({kFp, "ns"}, "agent2")});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 4);
  std::vector<std::string> args = {"HSET", mkey};
  for (size_t i = 0; i < 4; ++i) args.emplace_back(r->element[i]->str, r->element[i]->len);
  freeReplyObject(r);
  freeReplyObject(server_.Command(args));
  got = tier_->Fetch("ns", "agent");
  EXPECT_EQ(got.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(tier_->counters().corrupt_manifests.load(), 2u);
}

TEST_F(RemoteTierTest, TenantsShareNothing) {
  const auto tokens = MakeTokens(600, 4);
  SaveAndPush("tenant-a", "agent", tokens);
  EXPECT_EQ(tier_->Fetch("tenant-b", "agent").status().code(), StatusCode::kNotFound);
  SaveAndPush("tenant-b", "agent", tokens);
  // Identical content, separate copies: every key carries its tenant.
  redisReply* r = server_.Command({"KEYS", "*"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY);
  size_t a = 0, b = 0;
  const std::string pa = RedisRemoteStore::ScopePrefix({kFp, "tenant-a"});
  const std::string pb = RedisRemoteStore::ScopePrefix({kFp, "tenant-b"});
  for (size_t i = 0; i < r->elements; ++i) {
    const std::string k(r->element[i]->str, r->element[i]->len);
    a += k.rfind(pa, 0) == 0;
    b += k.rfind(pb, 0) == 0;
  }
  EXPECT_EQ(a + b, r->elements);
  freeReplyObject(r);
  EXPECT_EQ(a, 8u);  // 3 blocks + manifest each, the agent's block set, each block's claimants
  EXPECT_EQ(b, 8u);
  ASSERT_TRUE(tier_->Delete("tenant-a", "agent").ok());
  EXPECT_EQ(tier_->Fetch("tenant-a", "agent").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(tier_->Fetch("tenant-b", "agent").ok());
}

// Issue 29 finding 8: a push never removed superseded blocks and a delete
// removed only the current manifest's (4 of 5 blocks of a deleted agent
// survived, and it also removed blocks another agent still named). Pushes
// turn after turn of one agent, forks a second from it, deletes both: the
// remote holds exactly the blocks the live agents name, every time.
void CheckBlocksFollowTheLiveAgents(RemoteStore* remote, const std::function<size_t()>& n_blocks) {
  MemFileSystem fs;
  auto store = AgentStore::Open(Options(&fs));
  ASSERT_TRUE(store.ok());
  RemoteTier tier(remote, kFp, kKvTypes);
  auto push = [&](const std::string& id, const std::vector<int32_t>& tokens, uint64_t version) {
    AgentRecord rec = MakeRecord(id, tokens);
    rec.version = version;
    auto saved = (*store)->SaveAgent("ns", rec, ProviderFor(tokens));
    ASSERT_TRUE(saved.ok()) << saved.status().ToString();
    std::vector<KvBlock> blocks;
    for (uint32_t i = 0; i < saved->record.blocks.size(); ++i) blocks.push_back(MakeBlock(tokens, i));
    std::vector<const KvBlock*> ptrs;
    for (const auto& b : blocks) ptrs.push_back(&b);
    Status s = tier.Push(saved->record, ptrs);
    ASSERT_TRUE(s.ok()) << s.ToString();
  };
  auto blocks_of = [](size_t n_tokens) { return (n_tokens + kBlockTokens - 1) / kBlockTokens; };
  // Five turns: each ends in a partial block that the next turn replaces.
  for (uint64_t turn = 1; turn <= 5; ++turn) {
    const size_t n = 700 + 300 * turn;
    push("a", MakeTokens(n, 7), turn);
    EXPECT_EQ(n_blocks(), blocks_of(n)) << "after turn " << turn;
  }
  EXPECT_EQ(tier.counters().blocks_deleted.load(), 4u);  // the four superseded partial blocks
  // A fork naming the first two (full) blocks of "a", then its own partial one.
  const auto fork = MakeTokens(600, 7);
  push("b", fork, 1);
  EXPECT_EQ(n_blocks(), blocks_of(2200) + 1);
  ASSERT_TRUE(tier.Delete("ns", "a").ok());
  EXPECT_EQ(n_blocks(), blocks_of(600));  // only b's
  auto got = tier.Fetch("ns", "b");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->complete);
  EXPECT_EQ(got->valid_tokens, 600u);
  ASSERT_TRUE(tier.Delete("ns", "b").ok());
  EXPECT_EQ(n_blocks(), 0u);
}

TEST(MemRemoteTierTest, BlocksFollowTheLiveAgents) {
  MemRemoteStore remote;
  CheckBlocksFollowTheLiveAgents(&remote, [&] { return remote.block_count(); });
}

TEST_F(RemoteTierTest, BlocksFollowTheLiveAgents) {
  CheckBlocksFollowTheLiveAgents(remote_.get(), [&] {
    redisReply* r = server_.Command({"KEYS", RedisRemoteStore::ScopePrefix({kFp, "ns"}) + "b:*"});
    const size_t n = r && r->type == REDIS_REPLY_ARRAY ? r->elements : 999;
    if (r) freeReplyObject(r);
    return n;
  });
  // Deleting both left no claim behind either.
  redisReply* r = server_.Command({"KEYS", "*"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY);
  EXPECT_EQ(r->elements, 0u);
  freeReplyObject(r);
}

// A push that lost the manifest race (a newer version is there) releases
// nothing: the blocks the newer version names stay.
TEST_F(RemoteTierTest, StalePushReleasesNothing) {
  const auto t2 = MakeTokens(1000, 3);
  SaveAndPush("ns", "agent", t2, 20);
  MemFileSystem other_fs;
  auto other = AgentStore::Open(Options(&other_fs));
  ASSERT_TRUE(other.ok());
  const auto t1 = MakeTokens(300, 5);
  AgentRecord rec = MakeRecord("agent", t1);
  rec.version = 10;
  auto saved = (*other)->SaveAgent("ns", rec, ProviderFor(t1));
  ASSERT_TRUE(saved.ok());
  std::vector<KvBlock> blocks = {MakeBlock(t1, 0), MakeBlock(t1, 1)};
  ASSERT_TRUE(tier_->Push(saved->record, {&blocks[0], &blocks[1]}).ok());
  EXPECT_EQ(tier_->counters().blocks_deleted.load(), 0u);
  auto got = tier_->Fetch("ns", "agent");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->complete);
  EXPECT_EQ(got->record.tokens, t2);
}

TEST_F(RemoteTierTest, OutageIsCountedAndPushResumes) {
  const auto tokens = MakeTokens(300, 5);
  SaveAndPush("ns", "agent", tokens);
  server_.Stop();
  auto got = tier_->Fetch("ns", "agent");
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  std::vector<KvBlock> blocks = {MakeBlock(tokens, 0), MakeBlock(tokens, 1)};
  auto rec = store_->GetRecord("ns", "agent");
  ASSERT_TRUE(rec.ok());
  EXPECT_FALSE(tier_->Push(*rec, {&blocks[0], &blocks[1]}).ok());
  EXPECT_GE(tier_->counters().errors.load(), 2u);
  ASSERT_TRUE(server_.Start());
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  ASSERT_TRUE(tier_->Push(*rec, {&blocks[0], &blocks[1]}).ok());
  EXPECT_TRUE(tier_->Fetch("ns", "agent").ok());
}

}  // namespace
}  // namespace agentkv
