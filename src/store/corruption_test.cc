// Damaged files on disk: detected, the agent falls back to its longest valid
// prefix, the file is quarantined, counters move, nothing crashes.

#include <gtest/gtest.h>

#include <functional>

#include "store/agent_store.h"
#include "store/block_file.h"
#include "store/mem_file_system.h"
#include "store/store_ids.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT

class CorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = MakeTokens(600, 1);
    Reopen();
    ASSERT_TRUE(Save(store_.get(), "ns", "a", tokens_).ok());
  }
  void Reopen() {
    store_.reset();
    auto s = AgentStore::Open(Options(&mem_));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  std::string Dir() const { return "/cache/" + std::string(kFp) + "/" + NameHash("ns"); }
  std::string BlockPath(uint32_t i) const { return Dir() + "/blocks/" + ComputeBlockIds(kFp, tokens_)[i] + ".safetensors"; }
  std::string ManifestPath(const std::string& id) const { return Dir() + "/agents/" + NameHash(id) + ".json"; }
  void Damage(const std::string& path, const std::function<void(std::string&)>& edit) {
    std::string bytes = *mem_.ReadFile(path);
    edit(bytes);
    ASSERT_TRUE(mem_.CorruptFile(path, bytes).ok());
  }
  size_t Quarantined() { return CountFiles(mem_, "/quarantine/"); }

  MemFileSystem mem_;
  std::unique_ptr<AgentStore> store_;
  std::vector<int32_t> tokens_;
};

struct Case {
  const char* name;
  std::function<void(std::string&)> edit;
};

const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      {"flipped data byte", [](std::string& b) { b[b.size() - 5] ^= 0x10; }},
      {"truncated", [](std::string& b) { b.resize(b.size() / 2); }},
      {"zero length", [](std::string& b) { b.clear(); }},
      {"bad JSON header", [](std::string& b) { b[8] = '['; }},
      {"header length > file size", [](std::string& b) { b[5] = '\x01'; }},
      {"flipped header byte", [](std::string& b) { b[40] ^= 0x01; }},
  };
  return *cases;
}

TEST_F(CorruptionTest, BadBlockFallsBackToLongestValidPrefix) {
  for (uint32_t bad : {0u, 1u, 2u}) {
    for (const Case& c : Cases()) {
      SCOPED_TRACE(std::string(c.name) + " in block " + std::to_string(bad));
      Damage(BlockPath(bad), c.edit);
      uint64_t corrupt_before = store_->stats().corrupt_blocks;
      size_t quarantined_before = Quarantined();
      auto r = store_->LoadBlocks("ns", "a");
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_FALSE(r->complete);
      EXPECT_EQ(r->stop_reason.code(), StatusCode::kCorruption) << r->stop_reason.ToString();
      EXPECT_EQ(r->blocks.size(), bad);
      EXPECT_EQ(r->valid_tokens, bad * kBlockTokens);
      for (uint32_t i = 0; i < bad; ++i) EXPECT_EQ(r->blocks[i], MakeBlock(tokens_, i));
      EXPECT_EQ(store_->stats().corrupt_blocks, corrupt_before + 1);
      EXPECT_EQ(Quarantined(), quarantined_before + 1);
      EXPECT_FALSE(mem_.Exists(BlockPath(bad)));
      // Now simply missing.
      r = store_->LoadBlocks("ns", "a");
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->stop_reason.code(), StatusCode::kNotFound);
      EXPECT_EQ(r->valid_tokens, bad * kBlockTokens);
      // The next save rewrites only the missing block.
      int calls = 0;
      ASSERT_TRUE(Save(store_.get(), "ns", "a", tokens_, &calls).ok());
      EXPECT_EQ(calls, 1);
      EXPECT_TRUE(LoadsExactly(store_.get(), "ns", "a", tokens_));
    }
  }
}

TEST_F(CorruptionTest, SharedBadBlockAffectsEverySharer) {
  auto other = tokens_;
  other.resize(300);
  ASSERT_TRUE(Save(store_.get(), "ns", "b", other).ok());
  Damage(BlockPath(0), Cases()[0].edit);
  auto r = store_->LoadBlocks("ns", "b");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->valid_tokens, 0u);
  r = store_->LoadBlocks("ns", "a");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->valid_tokens, 0u);
  EXPECT_EQ(store_->stats().corrupt_blocks, 1u);  // quarantined once, then missing
  EXPECT_EQ(store_->stats().missing_blocks, 1u);
}

TEST_F(CorruptionTest, WrongFingerprintOrKvTypesInsideBlockRefused) {
  // Well-formed, checksummed files that claim another model / another type.
  for (int which = 0; which < 2; ++which) {
    auto ids = ComputeBlockIds(kFp, tokens_);
    BlockMeta meta{ids[1], ids[0], which == 0 ? "other-model" : kFp, which == 0 ? kKvTypes : "k:f16,v:f16", 0};
    auto bytes = EncodeBlockFile(MakeBlock(tokens_, 1), meta);
    ASSERT_TRUE(bytes.ok());
    ASSERT_TRUE(mem_.CorruptFile(BlockPath(1), *bytes).ok());
    auto r = store_->LoadBlocks("ns", "a");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->valid_tokens, kBlockTokens);
    EXPECT_EQ(r->stop_reason.code(), StatusCode::kCorruption);
    ASSERT_TRUE(Save(store_.get(), "ns", "a", tokens_).ok());
  }
}

TEST_F(CorruptionTest, BadManifestAtOpenIsQuarantinedOthersIntact) {
  auto other = MakeTokens(300, 7);
  ASSERT_TRUE(Save(store_.get(), "ns", "b", other).ok());
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(Save(store_.get(), "ns", "a", tokens_).ok());
    Damage(ManifestPath("a"), c.edit);
    Reopen();
    EXPECT_EQ(store_->GetRecord("ns", "a").status().code(), StatusCode::kNotFound);
    EXPECT_EQ(store_->stats().corrupt_manifests, 1u);
    EXPECT_FALSE(mem_.Exists(ManifestPath("a")));
    EXPECT_FALSE(mem_.Exists(BlockPath(0)));  // its blocks were orphans
    EXPECT_TRUE(LoadsExactly(store_.get(), "ns", "b", other));
  }
}

TEST_F(CorruptionTest, ManifestDamagedWhileOpen) {
  Damage(ManifestPath("a"), [](std::string& b) { b[b.size() / 2] ^= 0x04; });
  EXPECT_EQ(store_->LoadBlocks("ns", "a").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(store_->GetRecord("ns", "a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Quarantined(), 1u);
  EXPECT_EQ(store_->stats().corrupt_manifests, 1u);
  auto list = store_->ListAgents("ns");  // rescan: blocks released
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  EXPECT_EQ(CountFiles(mem_, "/blocks/"), 0u);
}

TEST_F(CorruptionTest, VerifyReportsEveryBadBlock) {
  Damage(BlockPath(0), Cases()[1].edit);
  Damage(BlockPath(2), Cases()[0].edit);
  auto v = store_->VerifyAgent("ns", "a");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->ok());
  EXPECT_EQ(v->n_blocks, 3u);
  EXPECT_EQ(v->n_ok, 1u);
  EXPECT_EQ(v->n_corrupt, 2u);
  EXPECT_EQ(v->valid_tokens, 0u);
  EXPECT_EQ(v->problems.size(), 2u);
  EXPECT_EQ(Quarantined(), 2u);
}

// Flip one bit at many positions of a small agent's only block: always
// detected through the store, never loaded, never a crash.
TEST_F(CorruptionTest, BitFlipsAnywhereInABlockAreCaught) {
  auto small = MakeTokens(3, 4);
  const std::string path = Dir() + "/blocks/" + ComputeBlockIds(kFp, small)[0] + ".safetensors";
  for (size_t pos = 0;; pos += 3) {
    int calls = 0;
    ASSERT_TRUE(Save(store_.get(), "ns", "s", small, &calls).ok());  // rewrites the missing block
    ASSERT_EQ(calls, 1);
    std::string bad = *mem_.ReadFile(path);
    if (pos >= bad.size()) break;
    bad[pos] ^= static_cast<char>(1 << (pos % 8));
    ASSERT_TRUE(mem_.CorruptFile(path, bad).ok());
    auto r = store_->LoadBlocks("ns", "s");
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->valid_tokens, 0u) << "flip at " << pos;
    ASSERT_EQ(r->stop_reason.code(), StatusCode::kCorruption) << "flip at " << pos;
    ASSERT_FALSE(mem_.Exists(path));
  }
  EXPECT_TRUE(LoadsExactly(store_.get(), "ns", "s", small));
  EXPECT_GT(store_->stats().corrupt_blocks, 100u);
}

}  // namespace
}  // namespace agentkv
