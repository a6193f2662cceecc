#include "store/block_read.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/mem_file_system.h"
#include "store/posix_file_system.h"
#include "store/store_ids.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using store_test::MakeTokens;

// A block of n_layers x K/V tensors, rows of row_bytes bytes; names padded to
// name_len characters (long names make a header longer than the first read).
KvBlock BigBlock(uint32_t n_layers, uint32_t row_bytes, size_t name_len = 0) {
  KvBlock b;
  b.index = 0;
  b.n_tokens = kBlockTokens;
  for (uint32_t l = 0; l < n_layers; ++l) {
    for (const char* kv : {"k", "v"}) {
      KvTensor t;
      t.name = "c0.l" + std::to_string(l) + "." + kv;
      if (t.name.size() < name_len) t.name += std::string(name_len - t.name.size(), 'x');
      t.row_bytes = row_bytes;
      t.n_rows = kBlockTokens;
      t.data.resize(size_t{kBlockTokens} * row_bytes);
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<uint8_t>(i * 131 + l * 7 + kv[0]);
      b.tensors.push_back(std::move(t));
    }
  }
  return b;
}

std::string Encode(const KvBlock& block) {
  auto ids = ComputeBlockIds("fp", MakeTokens(kBlockTokens, 1));
  auto bytes = EncodeBlockFile(block, {ids[0], "", "fp", "k:q4_0,v:q4_0", 0});
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

// Both file systems: the in-place reader of PosixFileSystem and the default
// (read a range, copy) that every other file system uses.
class BlockReadTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      std::string tmpl = ::testing::TempDir() + "/agentkv_block_read_XXXXXX";
      ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
      dir_ = tmpl;
      fs_ = std::make_unique<PosixFileSystem>();
    } else {
      dir_ = "/mem";
      fs_ = std::make_unique<MemFileSystem>();
      ASSERT_TRUE(fs_->CreateDirs(dir_).ok());
    }
  }
  void TearDown() override {
    if (GetParam()) std::filesystem::remove_all(dir_);
  }
  std::string Put(const std::string& bytes) {
    const std::string path = dir_ + "/b" + std::to_string(n_++) + ".safetensors";
    auto f = fs_->NewWritableFile(path);
    EXPECT_TRUE(f.ok());
    EXPECT_TRUE((*f)->Append(bytes).ok());
    EXPECT_TRUE((*f)->Sync().ok());
    EXPECT_TRUE((*f)->Close().ok());
    return path;
  }

  std::string dir_;
  std::unique_ptr<FileSystem> fs_;
  int n_ = 0;
};

TEST_P(BlockReadTest, ReadsWhatDecodeBlockFileReads) {
  // Small (whole file inside the first read), large (data read in place),
  // and a header longer than the first read.
  const KvBlock blocks[] = {store_test::MakeBlock(MakeTokens(300, 1), 0), BigBlock(8, 576),
                            BigBlock(260, 8, 200)};
  for (const KvBlock& block : blocks) {
    const std::string bytes = Encode(block);
    auto want = DecodeBlockFile(bytes);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = ReadBlockFile(fs_.get(), Put(bytes));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->block, block);
    EXPECT_EQ(got->meta.block_id, want->meta.block_id);
    EXPECT_EQ(got->meta.checksum, want->meta.checksum);
  }
  const std::string long_header = Encode(blocks[2]);
  auto data_offset = BlockDataOffset(long_header, long_header.size());
  ASSERT_TRUE(data_offset.ok());
  EXPECT_GT(*data_offset, kBlockHeadReadBytes) << "the header must outgrow the first read";
}

TEST_P(BlockReadTest, BadFilesAreCorruptionAndMissingIsNotFound) {
  const std::string bytes = Encode(BigBlock(8, 576));
  ASSERT_GT(bytes.size(), 2 * kBlockHeadReadBytes);
  std::string flipped_late = bytes;
  flipped_late[bytes.size() - 3] ^= 0x10;  // in the data read in place
  std::string flipped_early = bytes;
  flipped_early[bytes.size() / 2 < kBlockHeadReadBytes ? 0 : kBlockHeadReadBytes - 5] ^= 0x01;  // in the head read
  const std::string cases[] = {flipped_late, flipped_early, bytes.substr(0, bytes.size() - 1), bytes.substr(0, 100),
                               bytes.substr(0, 4), bytes + "x"};
  for (const std::string& bad : cases) {
    auto got = ReadBlockFile(fs_.get(), Put(bad));
    ASSERT_FALSE(got.ok()) << "size " << bad.size();
    EXPECT_EQ(got.status().code(), StatusCode::kCorruption) << got.status().ToString();
  }
  EXPECT_EQ(ReadBlockFile(fs_.get(), dir_ + "/absent.safetensors").status().code(), StatusCode::kNotFound);
}

TEST_P(BlockReadTest, ScatteredReadFillsPiecesInOrderAndStopsAtEndOfFile) {
  std::string bytes(5000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 13);
  const std::string path = Put(bytes);
  // More pieces than one preadv takes (IOV_MAX = 1024), some empty.
  std::vector<std::vector<uint8_t>> bufs(3000);
  for (size_t i = 0; i < bufs.size(); ++i) bufs[i].resize(i % 3 == 0 ? 0 : 2);
  std::vector<std::span<uint8_t>> pieces(bufs.begin(), bufs.end());
  auto got = fs_->ReadScattered(path, 10, pieces);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, 2000u * 2);
  std::string read;
  for (const auto& b : bufs) read.append(b.begin(), b.end());
  EXPECT_EQ(read, bytes.substr(10, 4000));
  // Past the end: fewer bytes.
  std::vector<uint8_t> tail(100);
  std::vector<std::span<uint8_t>> one{tail};
  auto short_read = fs_->ReadScattered(path, 4950, one);
  ASSERT_TRUE(short_read.ok());
  EXPECT_EQ(*short_read, 50u);
  EXPECT_EQ(std::string(tail.begin(), tail.begin() + 50), bytes.substr(4950));
}

INSTANTIATE_TEST_SUITE_P(FileSystems, BlockReadTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Posix" : "Mem"; });

}  // namespace
}  // namespace agentkv
