// Golden files pin the on-disk formats (docs/store-format.md): today's encoder
// must produce exactly the checked-in bytes of src/store/testdata/, and the
// decoder must read them back. A renamed key, a reordered field or another
// checksum breaks this test; if the change is intended, bump the format
// version, update the doc and regenerate with AGENTKV_UPDATE_GOLDEN=1.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "store/block_file.h"
#include "store/manifest.h"
#include "store/store_ids.h"
#include "util/hash.h"

namespace agentkv {
namespace {

const std::string kFingerprint = "fp0123456789abcdef";
const std::string kKvTypes = "k:q4_0,v:q4_0";
const std::vector<int32_t> kTokens = {1, 15043, 29892, 22444, 3186};

std::string TestdataPath(const std::string& name) { return std::string(AGENTKV_SOURCE_DIR) + "/src/store/testdata/" + name; }

std::string ReadGolden(const std::string& name) {
  const std::string path = TestdataPath(name);
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing golden file " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The golden file's bytes; with AGENTKV_UPDATE_GOLDEN=1, first (re)writes it
// with `current`.
std::string Golden(const std::string& name, const std::string& current) {
  if (const char* u = std::getenv("AGENTKV_UPDATE_GOLDEN"); u != nullptr && std::string(u) == "1") {
    std::ofstream(TestdataPath(name), std::ios::binary) << current;
  }
  return ReadGolden(name);
}

// Block 0 of kTokens: 5 tokens, a full-attention tensor and a windowed one
// (2 rows), so shapes, offsets and first positions all appear.
KvBlock GoldenBlock() {
  KvBlock b;
  b.index = 0;
  b.n_tokens = 5;
  KvTensor k{"c0.l0.k", 4, 0, 5, {}};
  for (uint8_t i = 0; i < 20; ++i) k.data.push_back(static_cast<uint8_t>(i * 7 + 1));
  KvTensor v{"c0.l0.v", 2, 3, 2, {0xa0, 0xa1, 0xa2, 0xa3}};
  b.tensors = {k, v};
  return b;
}

BlockMeta GoldenMeta() { return {ComputeBlockIds(kFingerprint, kTokens)[0], "", kFingerprint, kKvTypes, 0}; }

AgentRecord GoldenRecord(const std::string& block_file) {
  AgentRecord r;
  r.ns = "team";
  r.agent_id = "golden-agent";
  r.text = "Hello, golden world";
  r.tokens = kTokens;
  r.spans = {{0, 0}, {0, 5}, {5, 6}, {6, 13}, {13, 19}};
  r.kv_types = kKvTypes;
  r.fingerprint = kFingerprint;
  r.layout_version = 1;
  r.created_ms = 1764460800000;
  r.updated_ms = 1764460801234;
  r.version = 3;
  auto dec = DecodeBlockFile(block_file);
  r.blocks = {{GoldenMeta().block_id, 5, dec.ok() ? dec->meta.checksum : 0, block_file.size()}};
  return r;
}

TEST(FormatGoldenTest, BlockFile) {
  auto enc = EncodeBlockFile(GoldenBlock(), GoldenMeta());
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  const std::string golden = Golden("block.v1.safetensors", *enc);
  EXPECT_EQ(*enc, golden) << "the block file format changed (see the top of this file)";
  auto dec = DecodeBlockFile(golden);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->block, GoldenBlock());
  BlockMeta want = GoldenMeta();
  EXPECT_EQ(dec->meta.block_id, want.block_id);
  EXPECT_EQ(dec->meta.parent_id, "");
  EXPECT_EQ(dec->meta.fingerprint, kFingerprint);
  EXPECT_EQ(dec->meta.kv_types, kKvTypes);
  EXPECT_EQ(Hex64(dec->meta.checksum), golden.substr(golden.find("\"checksum\":\"") + 12, 16));
}

TEST(FormatGoldenTest, Manifest) {
  const std::string block = ReadGolden("block.v1.safetensors");
  ASSERT_FALSE(block.empty());
  const AgentRecord rec = GoldenRecord(block);
  ASSERT_NE(rec.blocks[0].checksum, 0u);
  auto enc = EncodeManifest(rec);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  const std::string golden = Golden("manifest.v1.json", *enc);
  EXPECT_EQ(*enc, golden) << "the manifest format changed (see the top of this file)";
  auto dec = DecodeManifest(golden);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, rec);
}

// Text that is not UTF-8 is stored as text_base64.
TEST(FormatGoldenTest, ManifestWithBinaryText) {
  AgentRecord rec = GoldenRecord(ReadGolden("block.v1.safetensors"));
  rec.text = std::string("Hello,\xff golden world", 20);
  rec.spans = {{0, 0}, {0, 5}, {5, 7}, {7, 14}, {14, 20}};
  auto enc = EncodeManifest(rec);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  const std::string golden = Golden("manifest_base64.v1.json", *enc);
  EXPECT_EQ(*enc, golden) << "the manifest format changed (see the top of this file)";
  EXPECT_NE(golden.find("\"text_base64\":"), std::string::npos);
  auto dec = DecodeManifest(golden);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, rec);
}

}  // namespace
}  // namespace agentkv
