#include "store/agent_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "store/block_read.h"
#include "store/fault_file_system.h"
#include "store/hooked_file_system_test_util.h"
#include "store/mem_file_system.h"
#include "store/posix_file_system.h"
#include "store/store_ids.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT

class AgentStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<AgentStore> Open(AgentStoreOptions o) {
    if (!o.now_ms) o.now_ms = [this] { return ++clock_ms_; };
    auto s = AgentStore::Open(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::unique_ptr<AgentStore> Open() { return Open(Options(&fault_)); }

  MemFileSystem mem_;
  FaultInjectingFileSystem fault_{&mem_};
  int64_t clock_ms_ = 1000;
};

TEST_F(AgentStoreTest, SaveLoadAndReopen) {
  auto tokens = MakeTokens(600, 1);
  {
    auto store = Open();
    auto res = store->SaveAgent("team", MakeRecord("a1", tokens), ProviderFor(tokens));
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    EXPECT_EQ(res->blocks_written, 3u);
    EXPECT_EQ(res->record.blocks.size(), 3u);
    EXPECT_EQ(res->record.blocks[2].n_tokens, 600u - 512u);
    EXPECT_EQ(res->record.fingerprint, kFp);
    EXPECT_TRUE(LoadsExactly(store.get(), "team", "a1", tokens));
  }
  auto store = Open();
  EXPECT_EQ(store->ListNamespaces(), std::vector<std::string>{"team"});
  auto list = store->ListAgents("team");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].agent_id, "a1");
  EXPECT_EQ((*list)[0].n_tokens, 600u);
  EXPECT_EQ((*list)[0].n_blocks, 3u);
  EXPECT_EQ((*list)[0].n_blocks_on_disk, 3u);
  EXPECT_TRUE((*list)[0].usable);
  auto rec = store->GetRecord("team", "a1");
  ASSERT_TRUE(rec.ok());
  AgentRecord want = MakeRecord("a1", tokens);
  EXPECT_EQ(rec->text, want.text);
  EXPECT_EQ(rec->spans, want.spans);
  EXPECT_EQ(rec->kv_types, kKvTypes);
  EXPECT_EQ(rec->layout_version, 1u);
  EXPECT_GT(rec->updated_ms, 0);
  EXPECT_TRUE(LoadsExactly(store.get(), "team", "a1", tokens));
  EXPECT_EQ(store->GetRecord("team", "zz").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->GetRecord("other", "a1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->LoadBlocks("team", "zz").status().code(), StatusCode::kNotFound);
}

TEST_F(AgentStoreTest, LoadFromFirstBlock) {
  auto tokens = MakeTokens(600, 1);
  auto store = Open();
  ASSERT_TRUE(Save(store.get(), "ns", "a", tokens).ok());
  auto r = store->LoadBlocks("ns", "a", 2);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->blocks.size(), 1u);
  EXPECT_EQ(r->blocks[0], MakeBlock(tokens, 2));
  EXPECT_EQ(r->valid_tokens, 600u);
  EXPECT_TRUE(r->complete);
}

TEST_F(AgentStoreTest, IncrementalSaveWritesOnlyNewBlocks) {
  auto store = Open();
  auto t600 = MakeTokens(600, 1);
  int calls = 0;
  ASSERT_TRUE(Save(store.get(), "ns", "a", t600, &calls).ok());
  EXPECT_EQ(calls, 3);
  // Grow the partial tail: one new block file, the old tail is deleted.
  std::vector<int32_t> t700 = t600;
  for (int i = 0; i < 100; ++i) t700.push_back(i);
  fault_.Reset();
  calls = 0;
  auto res = store->SaveAgent("ns", MakeRecord("a", t700), ProviderFor(t700, &calls));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(res->blocks_written, 1u);
  EXPECT_EQ(res->blocks_deleted, 1u);
  EXPECT_EQ(fault_.CountOps("create", "/blocks/"), 1u);
  EXPECT_EQ(fault_.CountOps("create", "/agents/"), 1u);
  EXPECT_EQ(fault_.CountOps("remove", "/blocks/"), 1u);
  EXPECT_EQ(CountFiles(mem_, "/blocks/"), 3u);
  // Same content again: nothing but the manifest is written.
  fault_.Reset();
  calls = 0;
  ASSERT_TRUE(Save(store.get(), "ns", "a", t700, &calls).ok());
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(fault_.CountOps("create", "/blocks/"), 0u);
  // Fill block 2 and start block 3.
  std::vector<int32_t> t800 = t700;
  for (int i = 0; i < 100; ++i) t800.push_back(1000 + i);
  fault_.Reset();
  calls = 0;
  ASSERT_TRUE(Save(store.get(), "ns", "a", t800, &calls).ok());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(CountFiles(mem_, "/blocks/"), 4u);
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a", t800));
  EXPECT_EQ(store->stats().blocks_written, 6u);
}

TEST_F(AgentStoreTest, SharedPrefixStoredOnceAndDeleteKeepsOthers) {
  auto store = Open();
  std::vector<std::vector<int32_t>> tokens;
  for (uint32_t i = 0; i < 10; ++i) {
    tokens.push_back(MakeTokens(3 * kBlockTokens + 10 + i, 100 + i, 3 * kBlockTokens));
    ASSERT_TRUE(Save(store.get(), "ns", "agent" + std::to_string(i), tokens.back()).ok());
  }
  // 3 shared blocks + 10 distinct tails.
  EXPECT_EQ(CountFiles(mem_, "/blocks/"), 13u);
  uint64_t bytes = 0;
  for (const auto& p : mem_.AllFiles()) {
    if (p.find("/blocks/") != std::string::npos) bytes += *mem_.FileSize(p);
  }
  uint64_t expect = 0;
  auto list = store->ListAgents("ns");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 10u);
  uint64_t tail_bytes = 0, prefix_bytes = 0;
  for (const auto& a : *list) tail_bytes += a.block_bytes;  // counts the shared blocks 10 times
  auto rec = store->GetRecord("ns", "agent0");
  for (int i = 0; i < 3; ++i) prefix_bytes += rec->blocks[i].file_bytes;
  expect = tail_bytes - 9 * prefix_bytes;
  EXPECT_EQ(bytes, expect);
  EXPECT_EQ(store->stats().block_files, 13u);

  // Another namespace never shares blocks.
  ASSERT_TRUE(Save(store.get(), "other", "agent0", tokens[0]).ok());
  EXPECT_EQ(CountFiles(mem_, "/blocks/"), 17u);

  ASSERT_TRUE(store->DeleteAgent("ns", "agent3").ok());
  EXPECT_EQ(CountFiles(mem_, "/blocks/"), 16u);
  EXPECT_EQ(store->GetRecord("ns", "agent3").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->DeleteAgent("ns", "agent3").code(), StatusCode::kNotFound);
  for (uint32_t i = 0; i < 10; ++i) {
    if (i != 3) EXPECT_TRUE(LoadsExactly(store.get(), "ns", "agent" + std::to_string(i), tokens[i])) << i;
  }
  // Reopen: reference counts are rebuilt from manifests; nothing is orphaned.
  store.reset();  // one writer per cache dir: the old store lets go of the lock first
  store = Open();
  EXPECT_EQ(store->stats().orphan_blocks_removed, 0u);
  for (uint32_t i = 0; i < 10; ++i) {
    if (i != 3) ASSERT_TRUE(store->DeleteAgent("ns", "agent" + std::to_string(i)).ok());
  }
  EXPECT_EQ(CountFiles(mem_, "/blocks/"), 4u);  // only the other namespace's
  EXPECT_EQ(CountFiles(mem_, "/agents/"), 1u);
}

TEST_F(AgentStoreTest, BadIdsRejectedBeforeAnyFileOperation) {
  auto store = Open();
  auto tokens = MakeTokens(10, 1);
  ASSERT_TRUE(Save(store.get(), "ns", "good", tokens).ok());
  const std::vector<std::string> bad = {"../x", "a/b", "", std::string(10240, 'a'), ".", "..", ".x", "a\\b", "a b"};
  fault_.Reset();
  for (const std::string& id : bad) {
    EXPECT_EQ(store->SaveAgent("ns", MakeRecord(id, tokens), ProviderFor(tokens)).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(store->SaveAgent(id, MakeRecord("good", tokens), ProviderFor(tokens)).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(store->GetRecord("ns", id).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(store->GetRecord(id, "good").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(store->LoadBlocks("ns", id).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(store->DeleteAgent("ns", id).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(store->DeleteAgent(id, "good").code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(store->VerifyAgent("ns", id).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(store->ListAgents(id).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(store->GetSummary("ns", id).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(fault_.op_count(), 0u);
  AgentStoreOptions o = Options(&fault_);
  o.fingerprint = "../other";
  EXPECT_EQ(AgentStore::Open(o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fault_.op_count(), 0u);
}

TEST_F(AgentStoreTest, BadRecordsRejected) {
  auto store = Open();
  auto tokens = MakeTokens(300, 1);
  AgentRecord r = MakeRecord("a", tokens);
  r.spans.pop_back();
  EXPECT_EQ(store->SaveAgent("ns", r, ProviderFor(tokens)).status().code(), StatusCode::kInvalidArgument);
  r = MakeRecord("a", tokens);
  r.kv_types = "k:f16,v:f16";
  EXPECT_EQ(store->SaveAgent("ns", r, ProviderFor(tokens)).status().code(), StatusCode::kInvalidArgument);
  r = MakeRecord("a", tokens);
  r.fingerprint = "another";
  EXPECT_EQ(store->SaveAgent("ns", r, ProviderFor(tokens)).status().code(), StatusCode::kInvalidArgument);
  // A provider returning the wrong block fails the save and leaves nothing behind.
  r = MakeRecord("a", tokens);
  auto wrong = [&](uint32_t i, const std::string&) -> Result<KvBlock> { return MakeBlock(tokens, 0); };
  EXPECT_EQ(store->SaveAgent("ns", r, wrong).status().code(), StatusCode::kInvalidArgument);
  auto failing = [&](uint32_t i, const std::string&) -> Result<KvBlock> {
    if (i == 1) return Status::Unavailable("engine busy");
    return MakeBlock(tokens, i);
  };
  EXPECT_EQ(store->SaveAgent("ns", r, failing).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store->GetRecord("ns", "a").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store->ListAgents("ns").ok());  // rescans after the failure
  EXPECT_EQ(CountFiles(mem_, "/blocks/"), 0u);
}

TEST_F(AgentStoreTest, OtherFingerprintIsAnotherCache) {
  auto tokens = MakeTokens(300, 1);
  {
    auto store = Open();
    ASSERT_TRUE(Save(store.get(), "ns", "a", tokens).ok());
  }
  AgentStoreOptions o = Options(&fault_);
  o.fingerprint = "fp-other-model";
  auto other = Open(o);
  EXPECT_TRUE(other->ListNamespaces().empty());
  EXPECT_EQ(other->GetRecord("ns", "a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(other->LoadBlocks("ns", "a").status().code(), StatusCode::kNotFound);
  // Files copied into the other model's directory are refused, not served.
  for (const auto& p : mem_.AllFiles()) {
    if (p.find(kFp) == std::string::npos) continue;  // /cache/LOCK
    std::string dst = p;
    dst.replace(dst.find(kFp), std::string(kFp).size(), "fp-other-model");
    ASSERT_TRUE(mem_.CreateDirs(ParentDir(dst)).ok());
    auto f = mem_.NewWritableFile(dst);
    ASSERT_TRUE((*f)->Append(*mem_.ReadFile(p)).ok());
  }
  other.reset();
  other = Open(o);
  EXPECT_EQ(other->GetRecord("ns", "a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(other->stats().corrupt_manifests, 1u);
  EXPECT_EQ(CountFiles(mem_, "fp-other-model/" + NameHash("ns") + "/blocks/"), 0u);  // orphans removed
  // The original is untouched.
  other.reset();
  auto store = Open();
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a", tokens));
}

TEST_F(AgentStoreTest, KvTypeMismatchNotLoadedButKept) {
  auto tokens = MakeTokens(300, 1);
  {
    auto store = Open();
    ASSERT_TRUE(Save(store.get(), "ns", "a", tokens).ok());
  }
  AgentStoreOptions o = Options(&fault_);
  o.kv_types = "k:q8_0,v:q8_0";
  {
    auto store = Open(o);
    auto list = store->ListAgents("ns");
    ASSERT_EQ(list->size(), 1u);
    EXPECT_FALSE((*list)[0].usable);
    EXPECT_EQ(store->LoadBlocks("ns", "a").status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(store->GetRecord("ns", "a").status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(CountFiles(mem_, "/blocks/"), 2u);  // blocks not treated as orphans
  }
  auto store = Open();
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a", tokens));
}

TEST_F(AgentStoreTest, DiskBudgetEvictsLeastRecentlyUsedAgents) {
  std::vector<std::vector<int32_t>> tokens;
  for (uint32_t i = 0; i < 6; ++i) tokens.push_back(MakeTokens(300, 10 + i));
  uint64_t per_agent = 0;
  {
    auto store = Open();
    ASSERT_TRUE(Save(store.get(), "ns", "probe", tokens[0]).ok());
    per_agent = store->stats().disk_bytes;
    ASSERT_TRUE(store->DeleteAgent("ns", "probe").ok());
  }
  AgentStoreOptions o = Options(&fault_);
  o.disk_budget_bytes = per_agent * 3 + per_agent / 2;
  auto store = Open(o);
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(Save(store.get(), "ns", "a" + std::to_string(i), tokens[i]).ok());
  ASSERT_TRUE(store->LoadBlocks("ns", "a0").ok());  // a0 is now the most recently used
  auto res = store->SaveAgent("ns", MakeRecord("a3", tokens[3]), ProviderFor(tokens[3]));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->agents_evicted, 1u);
  EXPECT_EQ(store->GetRecord("ns", "a1").status().code(), StatusCode::kNotFound);  // LRU
  EXPECT_LE(store->stats().disk_bytes, o.disk_budget_bytes);
  ASSERT_TRUE(Save(store.get(), "ns", "a4", tokens[4]).ok());
  EXPECT_EQ(store->GetRecord("ns", "a2").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a0", tokens[0]));
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a3", tokens[3]));
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a4", tokens[4]));
  EXPECT_EQ(store->stats().agents_evicted, 2u);
  // A smaller budget applies at Open (oldest update first).
  o.disk_budget_bytes = per_agent + per_agent / 2;
  store.reset();
  store = Open(o);
  EXPECT_EQ(store->stats().agents, 1u);
  EXPECT_TRUE(store->GetRecord("ns", "a4").ok());
}

// Issue 29 finding 11: one global LRU let one tenant's saves evict every
// other tenant's agents. With a per-namespace budget a tenant past it loses
// its own least recently used agents, and the others keep theirs.
TEST_F(AgentStoreTest, NamespaceDiskBudgetEvictsThatNamespacesAgentsFirst) {
  std::vector<std::vector<int32_t>> tokens;
  for (uint32_t i = 0; i < 8; ++i) tokens.push_back(MakeTokens(300, 40 + i));
  uint64_t per_agent = 0;
  {
    auto store = Open();
    ASSERT_TRUE(Save(store.get(), "ns", "probe", tokens[0]).ok());
    per_agent = store->stats().disk_bytes;
    ASSERT_TRUE(store->DeleteAgent("ns", "probe").ok());
  }
  AgentStoreOptions o = Options(&fault_);
  o.disk_budget_per_ns_bytes = per_agent * 2 + per_agent / 2;  // two agents each
  o.disk_budget_bytes = per_agent * 5;                         // and room for the quiet tenant
  auto store = Open(o);
  ASSERT_TRUE(Save(store.get(), "quiet", "q0", tokens[0]).ok());
  ASSERT_TRUE(Save(store.get(), "quiet", "q1", tokens[1]).ok());
  for (uint32_t i = 0; i < 6; ++i) {  // the noisy tenant saves far past its share
    auto res = store->SaveAgent("noisy", MakeRecord("n" + std::to_string(i), tokens[2 + i]), ProviderFor(tokens[2 + i]));
    ASSERT_TRUE(res.ok()) << res.status().ToString();
  }
  EXPECT_TRUE(LoadsExactly(store.get(), "quiet", "q0", tokens[0]));  // untouched
  EXPECT_TRUE(LoadsExactly(store.get(), "quiet", "q1", tokens[1]));
  EXPECT_TRUE(LoadsExactly(store.get(), "noisy", "n5", tokens[7]));  // its newest two
  EXPECT_TRUE(LoadsExactly(store.get(), "noisy", "n4", tokens[6]));
  EXPECT_EQ(store->GetRecord("noisy", "n3").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->GetRecord("noisy", "n0").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->stats().agents_evicted, 4u);
  // At Open too: a smaller share leaves each namespace its newest agent.
  o.disk_budget_per_ns_bytes = per_agent + per_agent / 2;
  store.reset();
  store = Open(o);
  EXPECT_EQ(store->stats().agents, 2u);
  EXPECT_TRUE(store->GetRecord("quiet", "q1").ok());
  EXPECT_TRUE(store->GetRecord("noisy", "n5").ok());
}

TEST_F(AgentStoreTest, ReadOnlyStoreChangesNothing) {
  auto tokens = MakeTokens(300, 1);
  {
    auto store = Open();
    ASSERT_TRUE(Save(store.get(), "ns", "a", tokens).ok());
  }
  ASSERT_TRUE(mem_.CreateDirs("/cache/" + std::string(kFp) + "/" + NameHash("ns") + "/blocks").ok());
  auto f = mem_.NewWritableFile("/cache/" + std::string(kFp) + "/" + NameHash("ns") + "/blocks/x.tmp");
  ASSERT_TRUE(f.ok());
  auto before = mem_.AllFiles();
  fault_.Reset();
  AgentStoreOptions o = Options(&fault_);
  o.read_only = true;
  auto store = Open(o);
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "a", tokens));
  EXPECT_EQ(store->SaveAgent("ns", MakeRecord("b", tokens), ProviderFor(tokens)).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->DeleteAgent("ns", "a").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(mem_.AllFiles(), before);
  EXPECT_EQ(fault_.CountOps("create") + fault_.CountOps("remove") + fault_.CountOps("rename"), 0u);
}

TEST_F(AgentStoreTest, EmptyAgentAndTimestamps) {
  auto store = Open();
  ASSERT_TRUE(Save(store.get(), "ns", "empty", {}).ok());
  auto r = store->LoadBlocks("ns", "empty");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->complete);
  EXPECT_EQ(r->valid_tokens, 0u);
  auto t = MakeTokens(10, 1);
  ASSERT_TRUE(Save(store.get(), "ns", "a", t).ok());
  auto first = *store->GetRecord("ns", "a");
  ASSERT_TRUE(Save(store.get(), "ns", "a", t).ok());
  auto second = *store->GetRecord("ns", "a");
  EXPECT_EQ(first.created_ms, second.created_ms);
  EXPECT_LT(first.updated_ms, second.updated_ms);
}

// A save writes its new block files without the store's lock: while agent
// b's save is stuck producing a block (a slow disk, as far as the store can
// tell), agent a's load completes. Deterministic: b's provider waits until
// the test has seen a's load finish (or given up on it).
TEST_F(AgentStoreTest, ALoadDoesNotWaitForAnotherAgentsBlockWrites) {
  auto store = Open();
  auto a_tokens = MakeTokens(700, 1);
  auto b_tokens = MakeTokens(700, 2);
  ASSERT_TRUE(Save(store.get(), "ns", "a", a_tokens).ok());
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  BlockProvider inner = ProviderFor(b_tokens);
  bool first = true;
  BlockProvider stuck = [&](uint32_t i, const std::string& id) -> Result<KvBlock> {
    if (first) {
      first = false;
      entered.set_value();
      released.wait();
    }
    return inner(i, id);
  };
  std::thread saver([&] { EXPECT_TRUE(store->SaveAgent("ns", MakeRecord("b", b_tokens), stuck).ok()); });
  entered.get_future().wait();
  auto load = std::async(std::launch::async, [&] { return LoadsExactly(store.get(), "ns", "a", a_tokens); });
  const bool done = load.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  release.set_value();
  saver.join();
  EXPECT_TRUE(done) << "the load waited for another agent's save";
  EXPECT_TRUE(load.get());
  EXPECT_TRUE(LoadsExactly(store.get(), "ns", "b", b_tokens));
}

TEST(AgentStorePosixTest, RoundTripOnDisk) {
  std::string dir = ::testing::TempDir() + "/agentkv_store_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  PosixFileSystem fs;
  auto tokens = MakeTokens(700, 5);
  {
    auto store = AgentStore::Open(Options(&fs, dir));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(Save(store->get(), "ns", "a", tokens).ok());
  }
  auto store = AgentStore::Open(Options(&fs, dir));
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE(LoadsExactly(store->get(), "ns", "a", tokens));
  auto v = (*store)->VerifyAgent("ns", "a");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok());
  ASSERT_TRUE((*store)->DeleteAgent("ns", "a").ok());
  auto left = fs.ListDir(dir + "/" + kFp + "/" + NameHash("ns") + "/blocks");
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

// Issue 29 finding 6: a cache dir (or any directory in it) that another
// user owns or may write in was trusted; the store now refuses to open.
TEST(AgentStorePosixTest, RefusesCacheDirsOthersMayWriteIn) {
  std::string dir = ::testing::TempDir() + "/agentkv_store_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  PosixFileSystem fs;
  {
    auto store = AgentStore::Open(Options(&fs, dir));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(Save(store->get(), "ns", "a", MakeTokens(300, 5)).ok());
  }
  const std::string ns_dir = dir + "/" + kFp + "/" + NameHash("ns");
  for (const std::string& d : {dir, dir + "/" + kFp, ns_dir, ns_dir + "/agents", ns_dir + "/blocks"}) {
    ASSERT_EQ(::chmod(d.c_str(), 0777), 0) << d;
    auto store = AgentStore::Open(Options(&fs, dir));
    EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition) << d;
    EXPECT_NE(store.status().message().find(d + " has mode 0777"), std::string::npos) << store.status().ToString();
    ASSERT_EQ(::chmod(d.c_str(), 0700), 0);
  }
  // A link planted where a namespace directory goes is refused, not skipped.
  const std::string other = dir + "/other";
  ASSERT_EQ(::mkdir(other.c_str(), 0700), 0);
  const std::string planted = dir + "/" + kFp + "/" + NameHash("ns2");
  ASSERT_EQ(::symlink(other.c_str(), planted.c_str()), 0);
  EXPECT_EQ(AgentStore::Open(Options(&fs, dir)).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_EQ(::unlink(planted.c_str()), 0);
  EXPECT_TRUE(AgentStore::Open(Options(&fs, dir)).ok());
  if (::chown(ns_dir.c_str(), 65534, 65534) == 0) {  // root only
    auto store = AgentStore::Open(Options(&fs, dir));
    EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(store.status().message().find("owned by uid 65534"), std::string::npos) << store.status().ToString();
  }
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

// On a file system with concurrent reads, LoadBlocks reads block files ahead
// on other threads; the result must be the same: blocks in order, and a
// corrupt block in the middle stops the load there (the blocks before it are
// returned, the bad file is quarantined), with read-ahead tasks still running.
TEST(AgentStorePosixTest, ReadAheadKeepsOrderAndStopsAtCorruption) {
  std::string dir = ::testing::TempDir() + "/agentkv_store_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  PosixFileSystem fs;
  ASSERT_TRUE(fs.ConcurrentReads());
  auto tokens = MakeTokens(12 * kBlockTokens + 17, 9);
  auto store = AgentStore::Open(Options(&fs, dir));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(Save(store->get(), "ns", "a", tokens).ok());
  EXPECT_TRUE(LoadsExactly(store->get(), "ns", "a", tokens));

  const std::string bad = dir + "/" + kFp + "/" + NameHash("ns") + "/blocks/" + ComputeBlockIds(kFp, tokens)[6] +
                          ".safetensors";
  auto bytes = fs.ReadFile(bad);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() - 3] ^= 0x5a;  // a flipped byte in the tensor data
  {
    auto f = fs.NewWritableFile(bad);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append(*bytes).ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  // An observer is told the plan (the indexed blocks), then each block file
  // that read and verified, the ones after the bad block included.
  struct Recorder : LoadObserver {
    std::mutex mu;
    std::vector<BlockRef> plan;
    std::vector<int> read_count;
    void OnPlan(uint32_t first, std::span<const BlockRef> blocks) override {
      EXPECT_EQ(first, 0u);
      plan.assign(blocks.begin(), blocks.end());
      read_count.assign(blocks.size(), 0);
    }
    void OnBlockRead(uint32_t index, const KvBlock& block) override {
      std::lock_guard<std::mutex> l(mu);
      ASSERT_LT(index, read_count.size());
      ++read_count[index];
      EXPECT_EQ(block.index, index);
    }
  } recorder;
  auto r = (*store)->LoadBlocks("ns", "a", 0, &recorder);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->complete);
  EXPECT_EQ(r->stop_reason.code(), StatusCode::kCorruption);
  ASSERT_EQ(r->blocks.size(), 6u);
  for (uint32_t i = 0; i < 6; ++i) EXPECT_EQ(r->blocks[i], MakeBlock(tokens, i));
  EXPECT_EQ(r->valid_tokens, 6 * kBlockTokens);
  EXPECT_FALSE(fs.Exists(bad));  // quarantined
  const auto ids = ComputeBlockIds(kFp, tokens);
  ASSERT_EQ(recorder.plan.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(recorder.plan[i].id, ids[i]);
    EXPECT_EQ(recorder.read_count[i], i == 6 ? 0 : 1) << "block " << i;
  }
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

// The threads a load reads with are kept: after StartReadThreads on a
// thread, its loads read every block on threads that existed already.
TEST(AgentStorePosixTest, LoadsAfterStartReadThreadsStartNoThread) {
  std::string dir = ::testing::TempDir() + "/agentkv_store_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  PosixFileSystem fs;
  auto tokens = MakeTokens(12 * kBlockTokens + 17, 11);
  auto store = AgentStore::Open(Options(&fs, dir));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(Save(store->get(), "ns", "a", tokens).ok());
  (*store)->StartReadThreads();
  std::set<long> existing;  // kernel thread ids (not reused soon, unlike pthread handles)
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    existing.insert(std::stol(e.path().filename().string()));
  }
  struct ReaderIds : LoadObserver {
    std::mutex mu;
    std::set<long> ids;
    void OnPlan(uint32_t, std::span<const BlockRef>) override {}
    void OnBlockRead(uint32_t, const KvBlock&) override {
      std::lock_guard<std::mutex> l(mu);
      ids.insert(static_cast<long>(::syscall(SYS_gettid)));
    }
  };
  for (int i = 0; i < 3; ++i) {
    ReaderIds readers;
    auto r = (*store)->LoadBlocks("ns", "a", 0, &readers);
    ASSERT_TRUE(r.ok() && r->complete) << r.status().ToString();
    ASSERT_FALSE(readers.ids.empty());
    EXPECT_FALSE(readers.ids.count(static_cast<long>(::syscall(SYS_gettid)))) << "read beside the manifest, not on the caller";
    for (long id : readers.ids) EXPECT_TRUE(existing.count(id)) << "load " << i << " read on a new thread " << id;
  }
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

// MakeBlock with rows 40x wider (~290 KB files), so that block files have
// data beyond the first read and LoadBlocks reads it in several chunks.
KvBlock WideBlock(const std::vector<int32_t>& tokens, uint32_t i) {
  KvBlock b = MakeBlock(tokens, i);
  for (KvTensor& t : b.tensors) {
    t.row_bytes *= 40;
    t.data.resize(size_t{t.n_rows} * t.row_bytes);
    for (size_t k = 0; k < t.data.size(); ++k) t.data[k] = static_cast<uint8_t>(k * 29 + i * 13 + t.name.size());
  }
  return b;
}

// Chunked read-ahead (block_read.h ReadBlockFiles) of large block files: the
// blocks come back exactly; an I/O error in one chunk of block 3 stops the
// load there with that error (blocks 0-2 returned, the file kept: the error
// is not the block's fault), and the next load reads everything again.
TEST(AgentStorePosixTest, ChunkedReadAheadStopsAtAFailedChunk) {
  std::string dir = ::testing::TempDir() + "/agentkv_store_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  PosixFileSystem posix;
  HookedFileSystem fs(&posix, /*concurrent=*/true);
  auto tokens = MakeTokens(7 * kBlockTokens + 40, 11);
  AgentStoreOptions o = Options(&fs, dir);
  o.read_threads = 4;
  const size_t chunk = 16 << 10;
  o.read_chunk_bytes = chunk;
  auto store = AgentStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto saved = (*store)->SaveAgent("ns", MakeRecord("a", tokens),
                                   [&](uint32_t i, const std::string&) -> Result<KvBlock> { return WideBlock(tokens, i); });
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  const std::string bad = dir + "/" + kFp + "/" + NameHash("ns") + "/blocks/" + ComputeBlockIds(kFp, tokens)[3] +
                          ".safetensors";
  auto size = posix.FileSize(bad);
  ASSERT_TRUE(size.ok());
  ASSERT_GT(*size, kBlockHeadReadBytes + 4 * chunk);

  auto expect_blocks = [&](const LoadedAgent& r, uint32_t n) {
    ASSERT_EQ(r.blocks.size(), n);
    for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(r.blocks[i], WideBlock(tokens, i)) << "block " << i;
  };
  auto all = (*store)->LoadBlocks("ns", "a");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(all->complete);
  expect_blocks(*all, 8);

  std::atomic<int> failed{0};
  fs.read_hook = [&](const std::string& path, uint64_t offset, size_t) {
    if (path != bad || offset != 10 * chunk) return Status::OK();
    ++failed;
    return Status::IOError("read " + path + ": Input/output error");
  };
  auto r = (*store)->LoadBlocks("ns", "a");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(failed.load(), 1);
  EXPECT_FALSE(r->complete);
  EXPECT_EQ(r->stop_reason.code(), StatusCode::kIOError) << r->stop_reason.ToString();
  expect_blocks(*r, 3);
  EXPECT_EQ(r->valid_tokens, 3 * kBlockTokens);
  EXPECT_TRUE(posix.Exists(bad));
  EXPECT_EQ((*store)->stats().corrupt_blocks, 0u);

  fs.read_hook = nullptr;
  auto again = (*store)->LoadBlocks("ns", "a");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->complete);
  expect_blocks(*again, 8);
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

}  // namespace
}  // namespace agentkv
