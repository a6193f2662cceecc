#include "store/fuzz_reseal.h"

#include <gtest/gtest.h>

#include "store/block_file.h"
#include "store/manifest.h"

namespace agentkv {
namespace {

TEST(FuzzResealTest, SeedsAreValid) {
  for (uint32_t seed = 0; seed < 16; ++seed) {
    auto block = DecodeBlockFile(fuzz::SeedBlockFile(seed));
    EXPECT_TRUE(block.ok()) << seed << ": " << block.status().ToString();
    auto manifest = DecodeManifest(fuzz::SeedManifest(seed));
    EXPECT_TRUE(manifest.ok()) << seed << ": " << manifest.status().ToString();
  }
}

// A byte changed in the data section fails the checksum; re-sealed, the file
// decodes again, with the changed byte: the fuzzer gets past the checksum.
TEST(FuzzResealTest, ResealedBlockFilePassesChecksum) {
  std::string bytes = fuzz::SeedBlockFile(2);
  bytes.back() ^= 0x5a;
  auto broken = DecodeBlockFile(bytes);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("checksum mismatch"), std::string::npos);
  ASSERT_TRUE(fuzz::ResealBlockFile(&bytes));
  auto fixed = DecodeBlockFile(bytes);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  EXPECT_EQ(static_cast<char>(fixed->block.tensors.back().data.back()), bytes.back());
}

// A re-sealed file with a structural fault is reported for that fault.
TEST(FuzzResealTest, ResealedBlockFileReachesStructuralChecks) {
  std::string bytes = fuzz::SeedBlockFile(2);
  const size_t at = bytes.find("\"n_tokens\":\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 12] = 'x';
  ASSERT_TRUE(fuzz::ResealBlockFile(&bytes));
  auto dec = DecodeBlockFile(bytes);
  ASSERT_FALSE(dec.ok());
  EXPECT_NE(dec.status().message().find("bad n_tokens"), std::string::npos) << dec.status().ToString();
}

TEST(FuzzResealTest, ResealedManifestPassesChecksumAndIds) {
  std::string bytes = fuzz::SeedManifest(3);
  const size_t at = bytes.find("\"tokens\":[");
  ASSERT_NE(at, std::string::npos);
  bytes.insert(at + 10, "7,");  // one more token: spans and block ids no longer match
  ASSERT_FALSE(DecodeManifest(bytes).ok());
  ASSERT_TRUE(fuzz::ResealManifest(&bytes));
  auto dec = DecodeManifest(bytes);
  ASSERT_FALSE(dec.ok());
  EXPECT_NE(dec.status().message().find("span count"), std::string::npos) << dec.status().ToString();
}

TEST(FuzzResealTest, RefusesWhatItCannotSeal) {
  std::string junk = "not a file";
  EXPECT_FALSE(fuzz::ResealBlockFile(&junk));
  EXPECT_FALSE(fuzz::ResealManifest(&junk));
  EXPECT_EQ(junk, "not a file");
}

}  // namespace
}  // namespace agentkv

namespace agentkv {
namespace {

// Found by block_file_fuzz: a (checksum-valid) block file whose fingerprint,
// kv types or tensor name holds a control byte decoded, although the writer
// refuses to write one. The decoder now refuses it too.
TEST(FuzzResealTest, DecoderRefusesWhatTheWriterRefuses) {
  const std::string seed = fuzz::SeedBlockFile(4);
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"\"fp-seed\"", "\"fp\\u0001eed\""},
                                 {"\"k:q4_0,v:q4_0\"", "\"k:q4_0\\u001bv:q4_0\""}}) {
    std::string bytes = seed;
    const size_t at = bytes.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bytes.replace(at, from.size(), to);
    // Keep the header length right (the replacement is longer).
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
    n += to.size() - from.size();
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    ASSERT_TRUE(fuzz::ResealBlockFile(&bytes));
    auto dec = DecodeBlockFile(bytes);
    ASSERT_FALSE(dec.ok()) << from;
    EXPECT_EQ(dec.status().code(), StatusCode::kCorruption);
    EXPECT_NE(dec.status().message().find("not printable"), std::string::npos) << dec.status().ToString();
  }
}

}  // namespace
}  // namespace agentkv
