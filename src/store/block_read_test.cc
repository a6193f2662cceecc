#include "store/block_read.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/fault_file_system.h"
#include "store/hooked_file_system_test_util.h"
#include "store/mem_file_system.h"
#include "store/posix_file_system.h"
#include "store/store_ids.h"
#include "store/store_test_util.h"
#include "util/warm_memory.h"

namespace agentkv {
namespace {

using store_test::HookedFileSystem;
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

// A read with a reserve sizes its tensors from the reserve's buffers and gives
// them back when the block is freed; the block keeps the reserve alive after
// its last other owner (the store) let go, and reads equal the plain read.
TEST_P(BlockReadTest, AReadWithAReserveTakesItsBuffersAndTheBlockKeepsTheReserveAlive) {
  const KvBlock block = BigBlock(8, 576);  // 16 tensors of 147,456 bytes
  const size_t tensor_bytes = size_t{kBlockTokens} * 576;
  const std::string path = Put(Encode(block));
  auto reserve = std::make_shared<WarmMemory>();
  reserve->SetTargets({{tensor_bytes, 16}});
  reserve->FillShare(0, 1);
  ASSERT_EQ(reserve->HeldBytes(), 16 * tensor_bytes);
  BlockReadOptions options;
  options.reserve = reserve;
  std::vector<std::string> paths = {path};
  auto got = ReadBlockFiles(fs_.get(), paths, options);
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  EXPECT_EQ(got[0]->block, block);
  EXPECT_EQ(reserve->TakenBytes(), 16 * tensor_bytes);
  EXPECT_EQ(reserve->HeldBytes(), 0u);
  EXPECT_EQ(got[0]->block.tensors[0].data.get_allocator().reserve(), reserve);
  WarmMemory* const memory = reserve.get();
  options.reserve.reset();
  reserve.reset();  // the block's tensors are the reserve's last owners now
  got[0]->block.tensors.pop_back();  // freed: its buffer goes back to the reserve
  EXPECT_EQ(memory->HeldBytes(), tensor_bytes);
  got.clear();  // the last tensor frees the reserve (and what it holds)

  auto plain = ReadBlockFile(fs_.get(), path);  // no reserve: plain allocations
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->block, block);
  EXPECT_EQ(plain->block.tensors[0].data.get_allocator().reserve(), nullptr);
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

// Small (whole file inside the head read), large, a header longer than the
// head read, and a large one with an empty tensor among the others.
std::vector<KvBlock> VariedBlocks() {
  KvBlock with_empty = BigBlock(2, 1000);
  with_empty.tensors[3].n_rows = 0;
  with_empty.tensors[3].data.clear();
  std::vector<KvBlock> out;
  out.push_back(store_test::MakeBlock(MakeTokens(300, 1), 0));
  out.push_back(BigBlock(4, 576));
  out.push_back(BigBlock(260, 8, 200));
  out.push_back(std::move(with_empty));
  return out;
}

BlockReadOptions Chunked(int n_threads, size_t chunk_bytes) {
  BlockReadOptions o;
  o.n_threads = n_threads;
  o.chunk_bytes = chunk_bytes;
  return o;
}

TEST_P(BlockReadTest, ReadBlockFilesReadsWhatDecodeBlockFileReads) {
  std::vector<std::string> paths;
  std::vector<DecodedBlock> want;
  for (const KvBlock& block : VariedBlocks()) {
    const std::string bytes = Encode(block);
    auto dec = DecodeBlockFile(bytes);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    ASSERT_EQ(dec->block, block);
    want.push_back(std::move(dec).value());
    paths.push_back(Put(bytes));
  }
  // Whole data sections; chunks smaller than a tensor, dividing nothing; of
  // the head read's size; of 1 MiB (two reads for the 1.2 MB file, one for
  // the others). One thread (in order) and several.
  for (size_t chunk : {size_t{0}, size_t{20000}, kBlockHeadReadBytes, kMinBlockReadChunkBytes}) {
    for (int threads : {1, 4}) {
      // on_file_read sees each file once, with the block the result holds.
      std::mutex mu;
      std::vector<int> seen(paths.size(), 0);
      BlockReadOptions options = Chunked(threads, chunk);
      options.on_file_read = [&](size_t file, const DecodedBlock& dec) {
        std::lock_guard<std::mutex> l(mu);
        ++seen[file];
        EXPECT_EQ(dec.block, want[file].block) << "file " << file;
      };
      auto got = ReadBlockFiles(fs_.get(), paths, options);
      ASSERT_EQ(got.size(), paths.size());
      EXPECT_EQ(seen, std::vector<int>(paths.size(), 1));
      for (size_t i = 0; i < paths.size(); ++i) {
        ASSERT_TRUE(got[i].ok()) << "chunk " << chunk << " threads " << threads << ": " << got[i].status().ToString();
        EXPECT_EQ(got[i]->block, want[i].block) << "file " << i << " chunk " << chunk << " threads " << threads;
        EXPECT_EQ(got[i]->meta.block_id, want[i].meta.block_id);
        EXPECT_EQ(got[i]->meta.checksum, want[i].meta.checksum);
      }
    }
  }
  EXPECT_TRUE(ReadBlockFiles(fs_.get(), {}, Chunked(4, 4096)).empty());
}

// on_data_read reports each file's data section exactly once, in ranges that
// tile it, each with its bytes already in the tensors and before the file's
// on_file_read; offset_major hands out chunks by their offset in the file,
// every file's first chunk before any file's second.
TEST_P(BlockReadTest, DataRangesTileEachFileAndComeInOffsetOrderWhenAsked) {
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) paths.push_back(Put(Encode(BigBlock(4, 1152))));  // 2.4 MB of data each
  for (bool offset_major : {false, true}) {
    for (int threads : {1, 3}) {
      std::mutex mu;
      std::vector<std::vector<std::pair<uint64_t, uint64_t>>> ranges(paths.size());
      std::vector<std::pair<size_t, uint64_t>> order;  // (file, begin) of each range, as reported
      std::vector<bool> verified(paths.size(), false);
      BlockReadOptions options = Chunked(threads, kMinBlockReadChunkBytes);
      options.offset_major = offset_major;
      options.on_data_read = [&](size_t file, const BlockFileLayout& layout, uint64_t begin, uint64_t end) {
        // The range's bytes are in the tensors: compare with the block's.
        const KvBlock want = BigBlock(4, 1152);
        uint64_t at = 0;
        for (size_t k : layout.file_order) {
          const KvTensor& t = layout.decoded.block.tensors[k];
          const uint64_t lo = std::max(begin, at), hi = std::min(end, at + t.data.size());
          for (uint64_t x = lo; x < hi; ++x) ASSERT_EQ(t.data[x - at], want.tensors[k].data[x - at]);
          at += t.data.size();
        }
        std::lock_guard<std::mutex> l(mu);
        EXPECT_FALSE(verified[file]);
        ranges[file].push_back({begin, end});
        order.push_back({file, begin});
      };
      options.on_file_read = [&](size_t file, const DecodedBlock&) {
        std::lock_guard<std::mutex> l(mu);
        verified[file] = true;
      };
      auto got = ReadBlockFiles(fs_.get(), paths, options);
      for (size_t i = 0; i < paths.size(); ++i) {
        ASSERT_TRUE(got[i].ok()) << got[i].status().ToString();
        uint64_t data_bytes = 0;
        for (const KvTensor& t : got[i]->block.tensors) data_bytes += t.data.size();
        std::sort(ranges[i].begin(), ranges[i].end());
        uint64_t next = 0;
        for (auto [b, e] : ranges[i]) {
          EXPECT_EQ(b, next) << "file " << i;
          next = e;
        }
        EXPECT_EQ(next, data_bytes) << "file " << i;
        EXPECT_TRUE(verified[i]);
      }
      if (offset_major && threads == 1) {
        // One reader: the heads in order, then the chunks by offset.
        std::vector<uint64_t> chunk_begins;
        for (size_t k = paths.size(); k < order.size(); ++k) chunk_begins.push_back(order[k].second);
        EXPECT_TRUE(std::is_sorted(chunk_begins.begin(), chunk_begins.end()));
        EXPECT_EQ(order[paths.size()].first, 0u);
        EXPECT_EQ(order[paths.size() + 1].first, 1u);
      }
    }
  }
}

// Every damaged file is Corruption naming it, whichever chunk holds the bad
// byte; the good files read in the same call are unaffected.
TEST_P(BlockReadTest, BadBytesInAnyChunkFailThatFileOnly) {
  const KvBlock good_block = BigBlock(2, 576);
  const std::string bytes = Encode(good_block);
  const size_t chunk = 16 << 10;
  ASSERT_GT(bytes.size(), 20 * chunk);
  std::vector<std::string> bad;
  for (size_t pos : {size_t{3}, size_t{200}, kBlockHeadReadBytes - 1, kBlockHeadReadBytes, 2 * chunk - 1, 2 * chunk,
                     bytes.size() / 2 + 77, bytes.size() - chunk, bytes.size() - 1}) {
    std::string b = bytes;
    b[pos] ^= 0x20;
    bad.push_back(std::move(b));
  }
  for (size_t cut : {size_t{1}, size_t{7}, chunk, chunk + 3, bytes.size() - kBlockHeadReadBytes, bytes.size() - 100,
                     bytes.size() - 4}) {
    bad.push_back(bytes.substr(0, bytes.size() - cut));  // truncated
  }
  bad.push_back(bytes + "x");                               // extended
  bad.push_back(bytes + std::string(3 * chunk + 5, '\0'));
  const std::string good = Put(bytes);
  for (size_t k = 0; k < bad.size(); ++k) {
    const std::string path = Put(bad[k]);
    const std::vector<std::string> paths = {good, path, good};
    for (int threads : {1, 4}) {
      std::mutex mu;
      std::vector<int> seen(paths.size(), 0);
      BlockReadOptions options = Chunked(threads, chunk);
      options.on_file_read = [&](size_t file, const DecodedBlock&) {
        std::lock_guard<std::mutex> l(mu);
        ++seen[file];
      };
      auto got = ReadBlockFiles(fs_.get(), paths, options);
      ASSERT_EQ(got.size(), 3u);
      EXPECT_EQ(seen, (std::vector<int>{1, 0, 1})) << "case " << k << ": a bad file is not handed out";
      ASSERT_FALSE(got[1].ok()) << "case " << k;
      EXPECT_EQ(got[1].status().code(), StatusCode::kCorruption) << "case " << k << ": " << got[1].status().ToString();
      EXPECT_NE(got[1].status().message().find(path), std::string::npos) << got[1].status().ToString();
      for (size_t i : {0, 2}) {
        ASSERT_TRUE(got[i].ok()) << "case " << k << ": " << got[i].status().ToString();
        EXPECT_EQ(got[i]->block, good_block);
      }
    }
    // The single-file reader agrees.
    auto one = ReadBlockFile(fs_.get(), path);
    EXPECT_EQ(one.status().code(), StatusCode::kCorruption) << "case " << k;
    EXPECT_NE(one.status().message().find(path), std::string::npos) << one.status().ToString();
  }
  auto missing = ReadBlockFiles(fs_.get(), std::vector<std::string>{good, dir_ + "/absent.safetensors"},
                                Chunked(4, chunk));
  EXPECT_TRUE(missing[0].ok());
  EXPECT_EQ(missing[1].status().code(), StatusCode::kNotFound);
}

// A file that shrinks while it is read (after its size was taken): the read
// comes back short, which is Corruption, not a block with stale bytes.
TEST_P(BlockReadTest, FileShrinkingWhileReadIsCorruption) {
  const std::string bytes = Encode(BigBlock(2, 576));
  const std::string other_bytes = Encode(BigBlock(2, 1000));
  const size_t chunk = 16 << 10;
  // Cut before the head read, before the first data chunk, before the last.
  for (uint64_t cut_at : {uint64_t{0}, uint64_t{kBlockHeadReadBytes}, uint64_t{bytes.size() / chunk * chunk}}) {
    const std::string path = Put(bytes);
    const std::string other = Put(other_bytes);
    HookedFileSystem hooked(fs_.get(), /*concurrent=*/true);
    bool cut = false;
    hooked.read_hook = [&](const std::string& p, uint64_t offset, size_t) {
      if (p == path && offset == cut_at && !cut) {
        cut = true;
        auto f = fs_->NewWritableFile(path);
        EXPECT_TRUE(f.ok());
        EXPECT_TRUE((*f)->Append(std::string_view(bytes).substr(0, offset + 100)).ok());
        EXPECT_TRUE((*f)->Close().ok());
      }
      return Status::OK();
    };
    auto got = ReadBlockFiles(&hooked, std::vector<std::string>{path, other}, Chunked(1, chunk));
    EXPECT_TRUE(cut) << cut_at;
    ASSERT_FALSE(got[0].ok()) << cut_at;
    EXPECT_EQ(got[0].status().code(), StatusCode::kCorruption) << cut_at << ": " << got[0].status().ToString();
    EXPECT_NE(got[0].status().message().find(path), std::string::npos) << got[0].status().ToString();
    // Caught by the read's size, before the checksum would be.
    EXPECT_NE(got[0].status().message().find("shrank while read"), std::string::npos) << got[0].status().ToString();
    EXPECT_TRUE(got[1].ok()) << got[1].status().ToString();
  }
}

// An I/O error in one data chunk fails that file with the file system's
// error (not Corruption: the bytes on disk may be fine); other files read.
TEST_P(BlockReadTest, IoErrorInOneChunkFailsThatFileOnly) {
  const KvBlock big = BigBlock(2, 576);
  const std::string a = Put(Encode(big)), b = Put(Encode(big)), c = Put(Encode(big));
  const std::vector<std::string> paths = {a, b, c};
  const size_t chunk = 16 << 10;
  for (int threads : {1, 4}) {
    HookedFileSystem hooked(fs_.get(), /*concurrent=*/true);
    hooked.read_hook = [&](const std::string& p, uint64_t offset, size_t) {
      return p == b && offset == 7 * chunk ? Status::IOError("read " + p + ": Input/output error") : Status::OK();
    };
    auto got = ReadBlockFiles(&hooked, paths, Chunked(threads, chunk));
    EXPECT_EQ(got[1].status().code(), StatusCode::kIOError) << got[1].status().ToString();
    EXPECT_NE(got[1].status().message().find(b), std::string::npos);
    for (size_t i : {0, 2}) {
      ASSERT_TRUE(got[i].ok()) << got[i].status().ToString();
      EXPECT_EQ(got[i]->block, big);
    }
  }
  // The same through FaultInjectingFileSystem (one thread: it orders its
  // operations): fail each of b's reads in turn.
  FaultInjectingFileSystem fault(fs_.get());
  auto clean = ReadBlockFiles(&fault, paths, Chunked(1, chunk));
  for (const auto& r : clean) ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<uint64_t> b_reads;
  const auto log = fault.log();
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i] == "read " + b) b_reads.push_back(i + 1);
  }
  ASSERT_GT(b_reads.size(), 10u) << "head + one read per chunk";
  for (uint64_t op : b_reads) {
    fault.Reset();
    fault.FailOpAt(op);
    auto got = ReadBlockFiles(&fault, paths, Chunked(1, chunk));
    EXPECT_EQ(got[1].status().code(), StatusCode::kIOError) << "op " << op << ": " << got[1].status().ToString();
    EXPECT_TRUE(got[0].ok() && got[2].ok()) << "op " << op;
  }
}

TEST(BlockReadChunkBytesTest, AboutTwoReadsPerThreadNoneUnderTheMinimum) {
  constexpr uint64_t kAlign = 64 << 10;
  // The 8B shape: 2,048 tokens (8 files of 9.4 MB) and 32K tokens (136 files).
  for (uint64_t bytes : {uint64_t{75'560'000}, uint64_t{1'284'572'000}, uint64_t{3'000'000'000}}) {
    for (int threads : {1, 8, 32}) {
      const uint64_t c = BlockReadChunkBytes(bytes, threads);
      EXPECT_EQ(c % kAlign, 0u);
      EXPECT_GE(c, kMinBlockReadChunkBytes);
      EXPECT_GE(c * 2 * threads, bytes) << "at most two reads per thread";
      if (c > kMinBlockReadChunkBytes) EXPECT_LT((c - kAlign) * 2 * threads, bytes) << "not larger than needed";
    }
  }
  EXPECT_LT(BlockReadChunkBytes(75'560'000, 32), 9'445'000u) << "2K tokens: each file split";
  EXPECT_GT(BlockReadChunkBytes(1'284'572'000, 32), 9'445'000u) << "32K tokens: a file per read";
  EXPECT_EQ(BlockReadChunkBytes(0, 32), kMinBlockReadChunkBytes);
  EXPECT_EQ(BlockReadChunkBytes(5'000'000, 0), 39u * kAlign) << "0 threads count as 1: 2.5 MB rounded up";
}

TEST(BlockReadChunkBytesTest, StreamingReadsAreAboutEightPerThreadOf64KiBAndMore) {
  EXPECT_EQ(StreamReadChunkBytes(uint64_t{80'900'000}, 32), 320u << 10);  // 8B shape, 2K tokens: ~252 reads
  EXPECT_EQ(StreamReadChunkBytes(uint64_t{5'400'000}, 8), 128u << 10);
  EXPECT_EQ(StreamReadChunkBytes(1000, 8), 64u << 10);
  EXPECT_EQ(StreamReadChunkBytes(0, 0), 64u << 10);
}

INSTANTIATE_TEST_SUITE_P(FileSystems, BlockReadTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Posix" : "Mem"; });

}  // namespace
}  // namespace agentkv
