// The model fingerprint covers every tensor data byte (an edit the old
// 17-sample hash missed changes it), and its digest is cached per file
// version so an unchanged model is not read again. Caching is observed
// through WeightsDigest::bytes_hashed and an injected clock, not timing.

#include "engine/weights_digest.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/model.h"
#include "engine/test_support.h"
#include "util/hash.h"

namespace agentkv::engine {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kLongAfter = int64_t{4'000'000'000} * 1'000'000'000;  // year 2096: never racy

class WeightsDigestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("agentkv_digest_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    model_ = (dir_ / "model.gguf").string();
    fs::copy_file(testing::BundledModelPath(), model_);
    size_ = fs::file_size(model_);
    options_.cache_dir = (dir_ / "digests").string();
    options_.now_ns = [] { return kLongAfter; };
  }
  void TearDown() override { fs::remove_all(dir_); }

  // XORs one byte of the copy in place (same size, same inode).
  void FlipByte(uint64_t offset) {
    std::fstream f(model_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c ^= 0x01;
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
    ASSERT_TRUE(f.good());
  }
  // Sets the copy's mtime `seconds` after what it is now.
  void ShiftMtime(int seconds) {
    struct stat st;
    ASSERT_EQ(::stat(model_.c_str(), &st), 0);
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    times[1].tv_sec += seconds;
    ASSERT_EQ(::utimensat(AT_FDCWD, model_.c_str(), times, 0), 0);
  }
  size_t CacheEntries() {
    if (!fs::exists(options_.cache_dir)) return 0;
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(options_.cache_dir)) n += e.path().extension() == ".digest";
    return n;
  }

  fs::path dir_;
  std::string model_;
  uint64_t size_ = 0;
  WeightsDigestOptions options_;
};

TEST_F(WeightsDigestTest, HashesEveryByteOnceThenReusesTheCache) {
  auto first = DigestWeights(model_, 4096, options_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->from_cache);
  EXPECT_EQ(first->bytes_hashed, size_ - 4096);
  EXPECT_EQ(CacheEntries(), 1u);
  auto again = DigestWeights(model_, 4096, options_);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->bytes_hashed, 0u);
  EXPECT_EQ(again->xxh3, first->xxh3);
  // Another data offset is another key.
  auto other = DigestWeights(model_, 8192, options_);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->from_cache);
  EXPECT_NE(other->xxh3, first->xxh3);
}

TEST_F(WeightsDigestTest, AnEditedFileIsHashedAgain) {
  auto first = DigestWeights(model_, 4096, options_);
  ASSERT_TRUE(first.ok());
  FlipByte(size_ / 2 + 12345);
  ShiftMtime(7);  // an edit within one timestamp tick is the racy case, tested below
  auto edited = DigestWeights(model_, 4096, options_);
  ASSERT_TRUE(edited.ok());
  EXPECT_FALSE(edited->from_cache);
  EXPECT_EQ(edited->bytes_hashed, size_ - 4096);
  EXPECT_NE(edited->xxh3, first->xxh3);
}

// Modified within kRacyWindowNs of hashing: hashed, never cached, because a
// later edit in the same timestamp tick would leave the key unchanged.
TEST_F(WeightsDigestTest, RecentlyModifiedFileIsNotCached) {
  struct stat st;
  ASSERT_EQ(::stat(model_.c_str(), &st), 0);
  const int64_t changed_ns = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  options_.now_ns = [changed_ns] { return changed_ns + kRacyWindowNs / 2; };
  for (int i = 0; i < 2; ++i) {
    auto d = DigestWeights(model_, 0, options_);
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->from_cache);
    EXPECT_EQ(d->bytes_hashed, size_);
  }
  EXPECT_EQ(CacheEntries(), 0u);
}

TEST_F(WeightsDigestTest, BadCacheEntryIsAMissAndBadInputAnError) {
  auto first = DigestWeights(model_, 0, options_);
  ASSERT_TRUE(first.ok());
  for (const auto& e : fs::directory_iterator(options_.cache_dir)) {
    std::ofstream(e.path(), std::ios::trunc) << "agentkv.weights-digest.v1\npath=x\nxxh3=00000000000000";
  }
  auto redo = DigestWeights(model_, 0, options_);
  ASSERT_TRUE(redo.ok());
  EXPECT_FALSE(redo->from_cache);
  EXPECT_EQ(redo->xxh3, first->xxh3);
  EXPECT_TRUE(DigestWeights(model_, 0, options_)->from_cache);  // rewritten

  WeightsDigestOptions no_cache;
  EXPECT_FALSE(DigestWeights(model_, 0, no_cache)->from_cache);
  EXPECT_FALSE(DigestWeights(model_, 0, no_cache)->from_cache);
  EXPECT_EQ(DigestWeights(model_, size_ + 1, options_).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DigestWeights((dir_ / "absent.gguf").string(), 0, options_).status().code(), StatusCode::kIOError);
}

// Issue 29 finding 6: under umask 0 the digest cache and its parents (the
// KV cache dir, created by the digest before the store opened) were 0777.
TEST_F(WeightsDigestTest, CacheDirsAndEntriesAreOwnerOnlyWhateverTheUmask) {
  options_.cache_dir = (dir_ / "kv" / "cache" / ".model-digests").string();
  const mode_t old_umask = ::umask(0);
  auto d = DigestWeights(model_, 0, options_);
  ::umask(old_umask);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(CacheEntries(), 1u);
  struct stat st;
  for (const fs::path& p : {dir_ / "kv", dir_ / "kv" / "cache", fs::path(options_.cache_dir)}) {
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u) << p;
  }
  for (const auto& e : fs::directory_iterator(options_.cache_dir)) {
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << e.path();
  }
}

// Issue 29 finding 6: the temp file's name is predictable; a link planted
// there made the server write through it into another user's file.
TEST_F(WeightsDigestTest, LinkPlantedAtTheTempFileIsNotFollowed) {
  fs::create_directories(options_.cache_dir);
  fs::permissions(options_.cache_dir, fs::perms::owner_all);
  const std::string victim = (dir_ / "victim").string();
  std::ofstream(victim) << "untouched";
  const std::string entry = options_.cache_dir + "/" +
                            Sha256Hex(fs::weakly_canonical(model_).string()).substr(0, 32) + ".digest";
  fs::create_symlink(victim, entry + ".tmp." + std::to_string(::getpid()));
  auto d = DigestWeights(model_, 0, options_);
  ASSERT_TRUE(d.ok());
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "untouched");
  EXPECT_FALSE(fs::is_symlink(entry));
  EXPECT_TRUE(DigestWeights(model_, 0, options_)->from_cache);  // the entry was still written
}

// Issue 29 finding 6: a cache dir others may write in was silently trusted
// (they could plant an entry that makes an edited model look unchanged).
TEST_F(WeightsDigestTest, GroupOrWorldWritableCacheDirIsNotUsed) {
  fs::create_directories(options_.cache_dir);
  fs::permissions(options_.cache_dir, fs::perms::all);
  auto d = DigestWeights(model_, 0, options_);
  ASSERT_TRUE(d.ok());  // hashing still works; only the cache is skipped
  EXPECT_EQ(CacheEntries(), 0u);
  EXPECT_FALSE(DigestWeights(model_, 0, options_)->from_cache);
}

// One flipped byte anywhere in the tensor data changes the fingerprint,
// including a byte between the 256 KiB samples the previous fingerprint read.
TEST_F(WeightsDigestTest, OneEditedWeightByteChangesTheModelFingerprint) {
  auto base = Model::Load(model_);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  const ModelInfo info = (*base)->info();
  base = Status::Internal("unload");
  auto original = Model::Load(testing::BundledModelPath());
  ASSERT_TRUE(original.ok());
  EXPECT_EQ((*original)->info().identity_hash, info.identity_hash);  // the path is not part of it
  original = Status::Internal("unload");

  const uint64_t begin = info.tensor_data_offset, span = size_ - begin;
  ASSERT_GT(begin, 0u);
  EXPECT_EQ(info.weights_bytes_hashed, span);
  constexpr uint64_t kSample = 256 * 1024;
  const uint64_t gap = begin + (kSample + (span - kSample) / 16) / 2;  // between old samples 0 and 1
  for (int s = 0; s <= 16; ++s) {
    const uint64_t at = begin + (span - kSample) * s / 16;
    ASSERT_FALSE(gap >= at && gap < at + kSample) << "the gap byte lies in old sample " << s;
  }
  for (uint64_t offset : {begin, gap, size_ - 1}) {
    FlipByte(offset);
    auto edited = Model::Load(model_);
    ASSERT_TRUE(edited.ok()) << edited.status().ToString();
    EXPECT_NE((*edited)->info().identity_hash, info.identity_hash) << "byte " << offset;
    FlipByte(offset);  // restore
  }
  auto restored = Model::Load(model_);
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ((*restored)->info().identity_hash, info.identity_hash);
}

}  // namespace
}  // namespace agentkv::engine
