#include "store/block_file.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "store/store_ids.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using store_test::MakeBlock;
using store_test::MakeTokens;

BlockMeta MetaFor(const std::vector<int32_t>& tokens, uint32_t index) {
  auto ids = ComputeBlockIds("fp", tokens);
  return {ids[index], index == 0 ? "" : ids[index - 1], "fp", "k:q4_0,v:q4_0", 0};
}

TEST(BlockFileTest, RoundTrip) {
  auto tokens = MakeTokens(300, 1);
  for (uint32_t index : {0u, 1u}) {
    KvBlock block = MakeBlock(tokens, index);
    auto bytes = EncodeBlockFile(block, MetaFor(tokens, index));
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto dec = DecodeBlockFile(*bytes);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    EXPECT_EQ(dec->block, block);
    EXPECT_EQ(dec->meta.block_id, MetaFor(tokens, index).block_id);
    EXPECT_EQ(dec->meta.parent_id, MetaFor(tokens, index).parent_id);
    EXPECT_EQ(dec->meta.fingerprint, "fp");
    EXPECT_EQ(dec->meta.kv_types, "k:q4_0,v:q4_0");
    auto header = EncodeBlockHeader(block, MetaFor(tokens, index));
    ASSERT_TRUE(header.ok());
    EXPECT_EQ(dec->meta.checksum, header->checksum);
    EXPECT_EQ(header->file_bytes, bytes->size());
  }
}

TEST(BlockFileTest, IsPlainSafetensors) {
  auto tokens = MakeTokens(10, 1);
  KvBlock block = MakeBlock(tokens, 0);
  auto bytes = EncodeBlockFile(block, MetaFor(tokens, 0));
  ASSERT_TRUE(bytes.ok());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<uint8_t>((*bytes)[i])} << (8 * i);
  EXPECT_EQ(n % 8, 0u);
  auto j = nlohmann::json::parse(bytes->substr(8, n));
  const auto& t = j["c0.l0.k"];
  EXPECT_EQ(t["dtype"], "U8");
  EXPECT_EQ(t["shape"], nlohmann::json({10, 18}));
  EXPECT_EQ(t["data_offsets"], nlohmann::json({0, 180}));
  EXPECT_EQ(j["__metadata__"]["n_tokens"], "10");
  EXPECT_EQ(j["__metadata__"]["index"], "0");
  EXPECT_EQ(bytes->size(), 8 + n + block.payload_bytes());
  EXPECT_EQ(bytes->substr(8 + n, 180), std::string(block.tensors[0].data.begin(), block.tensors[0].data.end()));
}

TEST(BlockFileTest, ZeroRowTensorsSurvive) {
  auto tokens = MakeTokens(5, 1);
  KvBlock block = MakeBlock(tokens, 0);
  block.tensors[2].n_rows = 0;
  block.tensors[2].data.clear();
  auto bytes = EncodeBlockFile(block, MetaFor(tokens, 0));
  ASSERT_TRUE(bytes.ok());
  auto dec = DecodeBlockFile(*bytes);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->block, block);
}

TEST(BlockFileTest, EncodeRejectsBadInput) {
  auto tokens = MakeTokens(5, 1);
  KvBlock good = MakeBlock(tokens, 0);
  auto meta = MetaFor(tokens, 0);
  auto expect_bad = [&](KvBlock b, BlockMeta m) {
    EXPECT_EQ(EncodeBlockHeader(b, m).status().code(), StatusCode::kInvalidArgument);
  };
  KvBlock b = good;
  b.tensors[0].data.pop_back();
  expect_bad(b, meta);
  b = good;
  b.tensors[1].name = b.tensors[0].name;
  expect_bad(b, meta);
  b = good;
  b.tensors[0].name = "__metadata__";
  expect_bad(b, meta);
  b = good;
  b.tensors[0].name = "quote\"";
  expect_bad(b, meta);
  b = good;
  b.tensors[0].first_pos = 1;  // rows past the block's tokens
  expect_bad(b, meta);
  b = good;
  b.n_tokens = 0;
  expect_bad(b, meta);
  BlockMeta m = meta;
  m.parent_id = meta.block_id;  // block 0 has no parent
  expect_bad(good, m);
  m = meta;
  m.fingerprint = "";
  expect_bad(good, m);
}

// Every truncation and every single-bit flip of a small file is detected:
// Corruption, never OK, never a crash.
TEST(BlockFileTest, EveryTruncationAndBitFlipDetected) {
  auto tokens = MakeTokens(3, 1);
  auto bytes = EncodeBlockFile(MakeBlock(tokens, 0), MetaFor(tokens, 0));
  ASSERT_TRUE(bytes.ok());
  ASSERT_LT(bytes->size(), 2000u);
  for (size_t len = 0; len < bytes->size(); ++len) {
    auto dec = DecodeBlockFile(std::string_view(*bytes).substr(0, len));
    ASSERT_EQ(dec.status().code(), StatusCode::kCorruption) << "truncated to " << len;
  }
  std::string extended = *bytes + "x";
  EXPECT_EQ(DecodeBlockFile(extended).status().code(), StatusCode::kCorruption);
  for (size_t pos = 0; pos < bytes->size(); ++pos) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string f = *bytes;
      f[pos] = static_cast<char>(f[pos] ^ (1 << bit));
      auto dec = DecodeBlockFile(f);
      ASSERT_EQ(dec.status().code(), StatusCode::kCorruption) << "flip at " << pos << " bit " << bit;
    }
  }
}

TEST(BlockFileTest, NamedCorruptions) {
  auto tokens = MakeTokens(20, 1);
  auto bytes = EncodeBlockFile(MakeBlock(tokens, 0), MetaFor(tokens, 0));
  ASSERT_TRUE(bytes.ok());
  auto code = [](std::string b) { return DecodeBlockFile(b).status().code(); };
  EXPECT_EQ(code(""), StatusCode::kCorruption);
  std::string huge = *bytes;
  huge[7] = '\x7f';  // header length > file size, must not be trusted
  EXPECT_EQ(code(huge), StatusCode::kCorruption);
  EXPECT_NE(DecodeBlockFile(huge).status().message().find("exceeds file size"), std::string::npos);
  std::string bad_json = *bytes;
  bad_json[8] = 'x';  // '{' -> 'x'
  EXPECT_EQ(code(bad_json), StatusCode::kCorruption);
  std::string data_flip = *bytes;
  data_flip.back() ^= 1;
  EXPECT_NE(DecodeBlockFile(data_flip).status().message().find("checksum"), std::string::npos);
  EXPECT_EQ(code(std::string(8, '\0')), StatusCode::kCorruption);  // empty header
}

}  // namespace
}  // namespace agentkv
