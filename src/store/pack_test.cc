// Pack files (docs/store-format.md, "Pack files") through the store: what a
// save writes, sharing and reference counting, damaged packs, recovery at
// open, the disk budget, caches written before packs. On the in-memory file
// system (one reader, in order) and on the real one (the parallel read path),
// with blocks large enough that their data lies beyond the first read.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/agent_store.h"
#include "store/block_file.h"
#include "store/manifest.h"
#include "store/store_ids.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT

constexpr uint32_t kFull = kBlockTokens;

class PackTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(disk_.dir.empty());
    Reopen();
  }
  void TearDown() override { store_.reset(); }  // before disk_ goes
  void Reopen(uint64_t budget = 0, bool packs = true) {
    store_.reset();
    AgentStoreOptions o = Options(fs_, dir_);
    o.disk_budget_bytes = budget;
    o.pack_full_blocks = packs;
    o.now_ms = [this] { return ++clock_; };
    auto s = AgentStore::Open(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  Result<SaveResult> Save(const std::string& id, const std::vector<int32_t>& tokens, int* calls = nullptr) {
    return store_->SaveAgent("ns", MakeRecord(id, tokens), [&tokens, calls](uint32_t i, const std::string&) {
      if (calls != nullptr) ++*calls;
      return Result<KvBlock>(WideBlock(tokens, i));
    });
  }
  bool Loads(const std::string& id, const std::vector<int32_t>& tokens) {
    auto r = store_->LoadBlocks("ns", id);
    if (!r.ok() || !r->complete || r->valid_tokens != tokens.size()) return false;
    for (uint32_t i = 0; i < r->blocks.size(); ++i) {
      if (!(r->blocks[i] == WideBlock(tokens, i))) return false;
    }
    return r->blocks.size() == (tokens.size() + kBlockTokens - 1) / kBlockTokens;
  }
  std::string NsDir() const { return dir_ + "/" + kFp + "/" + NameHash("ns"); }
  std::string PackPath(const std::string& pack_id) const { return NsDir() + "/blocks/" + pack_id + ".pack"; }
  // Names in blocks/ ending with `suffix`.
  std::vector<std::string> BlockDirFiles(const std::string& suffix) {
    std::vector<std::string> out;
    auto list = fs_->ListDir(NsDir() + "/blocks");
    if (!list.ok()) return out;
    for (const DirEntry& e : *list) {
      if (e.name.ends_with(suffix)) out.push_back(e.name);
    }
    return out;
  }
  size_t Quarantined() {
    auto list = fs_->ListDir(NsDir() + "/quarantine");
    return list.ok() ? list->size() : 0;
  }
  uint64_t BytesUnder(const std::string& sub) {
    uint64_t total = 0;
    auto list = fs_->ListDir(NsDir() + "/" + sub);
    if (!list.ok()) return 0;
    for (const DirEntry& e : *list) total += *fs_->FileSize(NsDir() + "/" + sub + "/" + e.name);
    return total;
  }
  void Overwrite(const std::string& path, const std::string& bytes) {
    auto f = fs_->NewWritableFile(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE((*f)->Append(bytes).ok());
    ASSERT_TRUE((*f)->Sync().ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  AgentRecord Record(const std::string& id) {
    auto rec = store_->GetRecord("ns", id);
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    return rec.ok() ? *rec : AgentRecord{};
  }

  TestFileSystem disk_{GetParam()};
  const std::string& dir_ = disk_.dir;
  FileSystem* const fs_ = disk_.fs.get();
  std::unique_ptr<AgentStore> store_;
  int64_t clock_ = 1000;
};

TEST_P(PackTest, FullBlocksGoIntoOnePackTheTailIntoABlockFile) {
  const auto tokens = MakeTokens(5 * kFull + 40, 1);
  int calls = 0;
  auto res = Save("a", tokens, &calls);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(res->blocks_written, 6u);
  ASSERT_EQ(BlockDirFiles(".pack").size(), 1u);
  ASSERT_EQ(BlockDirFiles(".safetensors").size(), 1u);

  // The manifest names the pack and each image's offset; the images lie back
  // to back, each exactly what the block's own file would hold.
  const AgentRecord rec = Record("a");
  ASSERT_EQ(rec.blocks.size(), 6u);
  const std::string pack_id = BlockDirFiles(".pack")[0].substr(0, kBlockIdChars);
  const std::string pack = *fs_->ReadFile(PackPath(pack_id));
  uint64_t offset = 0;
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(rec.blocks[i].pack, pack_id) << i;
    EXPECT_EQ(rec.blocks[i].pack_offset, offset) << i;
    BlockMeta meta{rec.blocks[i].id, i == 0 ? "" : rec.blocks[i - 1].id, kFp, kKvTypes, 0};
    auto image = EncodeBlockFile(WideBlock(tokens, i), meta);
    ASSERT_TRUE(image.ok());
    EXPECT_EQ(pack.substr(offset, rec.blocks[i].file_bytes), *image) << i;
    offset += rec.blocks[i].file_bytes;
  }
  EXPECT_EQ(pack.size(), offset);
  EXPECT_TRUE(rec.blocks[5].pack.empty());
  EXPECT_EQ(rec.blocks[5].pack_offset, 0u);

  EXPECT_TRUE(Loads("a", tokens));
  Reopen();
  EXPECT_TRUE(Loads("a", tokens));
  auto v = store_->VerifyAgent("ns", "a");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok());
  EXPECT_EQ(v->n_ok, 6u);
  const StoreStats st = store_->stats();
  EXPECT_EQ(st.pack_files, 1u);
  EXPECT_EQ(st.packed_blocks, 5u);
  EXPECT_EQ(st.block_files, 1u);
  EXPECT_EQ(st.disk_bytes, BytesUnder("blocks") + BytesUnder("agents"));
  EXPECT_EQ(st.orphan_blocks_removed, 0u);
}

TEST_P(PackTest, OneNewFullBlockIsABlockFile) {
  const auto tokens = MakeTokens(kFull + 10, 1);
  ASSERT_TRUE(Save("a", tokens).ok());
  EXPECT_EQ(BlockDirFiles(".pack").size(), 0u);
  EXPECT_EQ(BlockDirFiles(".safetensors").size(), 2u);
  EXPECT_TRUE(Loads("a", tokens));
}

TEST_P(PackTest, SharersReusePackedBlocksAndThePackLivesWhileNamed) {
  const auto a = MakeTokens(4 * kFull + 10, 1, 3 * kFull);
  const auto b = MakeTokens(3 * kFull + 300, 2, 3 * kFull);  // blocks 0-2 as a's; its own block 3 and tail
  ASSERT_TRUE(Save("a", a).ok());
  int calls = 0;
  auto res = Save("b", b, &calls);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(calls, 2) << "blocks 0-2 are reused from a's pack";
  EXPECT_EQ(BlockDirFiles(".pack").size(), 1u);
  EXPECT_EQ(Record("b").blocks[2].pack, Record("a").blocks[2].pack);

  ASSERT_TRUE(store_->DeleteAgent("ns", "a").ok());
  EXPECT_EQ(BlockDirFiles(".pack").size(), 1u) << "b still names it";
  EXPECT_TRUE(Loads("b", b));
  Reopen();
  EXPECT_EQ(BlockDirFiles(".pack").size(), 1u);
  EXPECT_TRUE(Loads("b", b));
  ASSERT_TRUE(store_->DeleteAgent("ns", "b").ok());
  EXPECT_TRUE(BlockDirFiles("").empty());
  EXPECT_EQ(store_->stats().disk_bytes, 0u);
}

// An agent that diverges inside its pack keeps the pack alive through the
// blocks it still names; the dead images stay on disk and are reused.
TEST_P(PackTest, DeadBlocksOfALivePackStayAndAreReused) {
  const auto before = MakeTokens(4 * kFull + 10, 1, 2 * kFull);
  const auto after = MakeTokens(4 * kFull + 10, 3, 2 * kFull);  // same blocks 0-1, then different
  ASSERT_TRUE(Save("a", before).ok());
  const std::string first_pack = Record("a").blocks[0].pack;
  ASSERT_TRUE(Save("a", after).ok());
  EXPECT_TRUE(Loads("a", after));
  EXPECT_TRUE(fs_->Exists(PackPath(first_pack))) << "a still names its blocks 0-1";
  EXPECT_EQ(BlockDirFiles(".pack").size(), 2u);
  const uint64_t disk_bytes = store_->stats().disk_bytes;
  EXPECT_EQ(disk_bytes, BytesUnder("blocks") + BytesUnder("agents")) << "dead images count as real bytes";

  int calls = 0;
  ASSERT_TRUE(Save("c", before, &calls).ok());
  EXPECT_EQ(calls, 1) << "blocks 2-3 still lie in the live pack: only the tail is written";
  EXPECT_EQ(Record("c").blocks[3].pack, first_pack);
  EXPECT_TRUE(Loads("c", before));

  ASSERT_TRUE(store_->DeleteAgent("ns", "a").ok());
  EXPECT_TRUE(fs_->Exists(PackPath(first_pack)));
  ASSERT_TRUE(store_->DeleteAgent("ns", "c").ok());
  EXPECT_TRUE(BlockDirFiles("").empty());
}

TEST_P(PackTest, FlippedByteInAPackedImageStopsThereAndQuarantinesThePack) {
  const auto tokens = MakeTokens(4 * kFull + 10, 1);
  for (uint32_t bad : {0u, 2u, 3u}) {
    SCOPED_TRACE("bad block " + std::to_string(bad));
    ASSERT_TRUE(Save("a", tokens).ok());
    const AgentRecord rec = Record("a");
    const std::string path = PackPath(rec.blocks[bad].pack);
    std::string bytes = *fs_->ReadFile(path);
    bytes[rec.blocks[bad].pack_offset + rec.blocks[bad].file_bytes - 5] ^= 0x10;
    Overwrite(path, bytes);
    const StoreStats st = store_->stats();
    const size_t quarantined = Quarantined();

    auto r = store_->LoadBlocks("ns", "a");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->complete);
    EXPECT_EQ(r->stop_reason.code(), StatusCode::kCorruption) << r->stop_reason.ToString();
    ASSERT_EQ(r->blocks.size(), bad);
    for (uint32_t i = 0; i < bad; ++i) EXPECT_EQ(r->blocks[i], WideBlock(tokens, i));
    EXPECT_EQ(r->valid_tokens, bad * kFull);
    EXPECT_EQ(store_->stats().corrupt_blocks, st.corrupt_blocks + 1);
    EXPECT_EQ(store_->stats().pack_files, 0u);
    EXPECT_FALSE(fs_->Exists(path));
    EXPECT_EQ(Quarantined(), quarantined + 1);

    // Every block the pack held is missing now; the next save rewrites them.
    r = store_->LoadBlocks("ns", "a");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->stop_reason.code(), StatusCode::kNotFound);
    EXPECT_EQ(r->valid_tokens, 0u);
    int calls = 0;
    ASSERT_TRUE(Save("a", tokens, &calls).ok());
    EXPECT_EQ(calls, 4);
    EXPECT_TRUE(Loads("a", tokens));
  }
}

TEST_P(PackTest, VerifyReportsTheBadImageAndThePackGone) {
  const auto tokens = MakeTokens(4 * kFull + 10, 1);
  ASSERT_TRUE(Save("a", tokens).ok());
  const AgentRecord rec = Record("a");
  const std::string path = PackPath(rec.blocks[1].pack);
  std::string bytes = *fs_->ReadFile(path);
  bytes[rec.blocks[1].pack_offset + 40] ^= 0x01;  // in image 1's header
  Overwrite(path, bytes);
  auto v = store_->VerifyAgent("ns", "a");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->n_ok, 2u);       // block 0, and the tail in its own file
  EXPECT_EQ(v->n_corrupt, 1u);  // block 1
  EXPECT_EQ(v->n_missing, 2u);  // blocks 2-3 went with the quarantined pack
  EXPECT_EQ(v->valid_tokens, kFull);
  EXPECT_FALSE(fs_->Exists(path));
}

TEST_P(PackTest, TruncatedPackStopsAtTheFirstCutImage) {
  const auto tokens = MakeTokens(4 * kFull + 10, 1);
  ASSERT_TRUE(Save("a", tokens).ok());
  const AgentRecord rec = Record("a");
  const std::string path = PackPath(rec.blocks[0].pack);
  Overwrite(path, fs_->ReadFile(path)->substr(0, rec.blocks[2].pack_offset + 100));
  auto r = store_->LoadBlocks("ns", "a");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->blocks.size(), 2u);
  EXPECT_EQ(r->stop_reason.code(), StatusCode::kCorruption) << r->stop_reason.ToString();
  EXPECT_FALSE(fs_->Exists(path));
}

// A manifest (checksummed, so written so on purpose or by a bug) that places
// an image past the end of its pack: that block is bad, the ones before load.
TEST_P(PackTest, ManifestPointingOutsideThePackStopsThere) {
  const auto tokens = MakeTokens(4 * kFull + 10, 1);
  ASSERT_TRUE(Save("a", tokens).ok());
  AgentRecord rec = Record("a");
  rec.blocks[3].pack_offset = *fs_->FileSize(PackPath(rec.blocks[3].pack));
  auto manifest = EncodeManifest(rec);
  ASSERT_TRUE(manifest.ok());
  Overwrite(NsDir() + "/agents/" + NameHash("a") + ".json", *manifest);
  Reopen();
  auto r = store_->LoadBlocks("ns", "a");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->blocks.size(), 3u);
  EXPECT_EQ(r->stop_reason.code(), StatusCode::kCorruption);
  EXPECT_NE(r->stop_reason.message().find("outside the pack"), std::string::npos) << r->stop_reason.ToString();
}

TEST_P(PackTest, OrphanAndTempPacksAreRemovedAtOpen) {
  const auto tokens = MakeTokens(3 * kFull, 1);
  ASSERT_TRUE(Save("a", tokens).ok());
  const std::string orphan = PackPath(PackId(std::vector<std::string>{"x"}, 0));
  Overwrite(orphan, "not named by any manifest");
  Overwrite(orphan + ".tmp", "an interrupted save");
  Reopen();
  EXPECT_FALSE(fs_->Exists(orphan));
  EXPECT_FALSE(fs_->Exists(orphan + ".tmp"));
  EXPECT_EQ(store_->stats().orphan_blocks_removed, 1u);
  EXPECT_EQ(store_->stats().temp_files_removed, 1u);
  EXPECT_EQ(BlockDirFiles(".pack").size(), 1u);
  EXPECT_TRUE(Loads("a", tokens));
}

// The budget counts a pack's real size, once; evicting the last agent that
// names a pack deletes it.
TEST_P(PackTest, BudgetCountsPacksOnce) {
  const auto a = MakeTokens(3 * kFull + 5, 1);
  const auto b = MakeTokens(3 * kFull + 5, 2);
  ASSERT_TRUE(Save("a", a).ok());
  const uint64_t one_agent = store_->stats().disk_bytes;
  ASSERT_EQ(one_agent, BytesUnder("blocks") + BytesUnder("agents"));
  Reopen(/*budget=*/one_agent + one_agent / 2);
  ASSERT_TRUE(Save("b", b).ok());
  EXPECT_EQ(store_->GetRecord("ns", "a").status().code(), StatusCode::kNotFound) << "a was evicted";
  EXPECT_EQ(BlockDirFiles(".pack").size(), 1u);
  EXPECT_EQ(store_->stats().disk_bytes, BytesUnder("blocks") + BytesUnder("agents"));
  EXPECT_LE(store_->stats().disk_bytes, one_agent + one_agent / 2);
  EXPECT_TRUE(Loads("b", b));
}

TEST_P(PackTest, ReadHeldBlocksReadsPackedBlocks) {
  const auto tokens = MakeTokens(3 * kFull + 5, 1);
  ASSERT_TRUE(Save("a", tokens).ok());
  AgentRecord remote = Record("a");
  remote.agent_id = "elsewhere";
  auto held = store_->ReadHeldBlocks("ns", remote);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(held->size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE((*held)[i].has_value()) << i;
    EXPECT_EQ(*(*held)[i], WideBlock(tokens, i));
  }
}

// A cache written before packs (no pack fields in its manifests) reads as
// before, and its block files are reused, not rewritten.
TEST_P(PackTest, CacheWithoutPacksLoadsAndIsReused) {
  const auto a = MakeTokens(3 * kFull + 5, 1, 3 * kFull);
  const auto b = MakeTokens(3 * kFull + 50, 2, 3 * kFull);
  Reopen(0, /*packs=*/false);
  ASSERT_TRUE(Save("a", a).ok());
  EXPECT_TRUE(BlockDirFiles(".pack").empty());
  const std::string manifest = *fs_->ReadFile(NsDir() + "/agents/" + NameHash("a") + ".json");
  EXPECT_EQ(manifest.find("\"pack\""), std::string::npos);
  Reopen();
  EXPECT_TRUE(Loads("a", a));
  int calls = 0;
  ASSERT_TRUE(Save("b", b, &calls).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(BlockDirFiles(".pack").empty());
  EXPECT_TRUE(Loads("b", b));
}

INSTANTIATE_TEST_SUITE_P(FileSystems, PackTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Posix" : "Mem"; });

}  // namespace
}  // namespace agentkv
