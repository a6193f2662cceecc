#include "store/manifest.h"

#include <gtest/gtest.h>

#include "store/store_ids.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

AgentRecord FullRecord(size_t n_tokens) {
  AgentRecord r = store_test::MakeRecord("agent-1", store_test::MakeTokens(n_tokens, 3));
  r.ns = "team";
  r.fingerprint = "fp";
  r.created_ms = 1700000000000;
  r.updated_ms = 1700000000123;
  auto ids = ComputeBlockIds(r.fingerprint, r.tokens);
  for (size_t i = 0; i < ids.size(); ++i) {
    uint32_t n = static_cast<uint32_t>(std::min<size_t>(kBlockTokens, n_tokens - i * kBlockTokens));
    r.blocks.push_back({ids[i], n, 0x0123456789abcdefull + i, 1000 + i});
  }
  return r;
}

TEST(ManifestTest, RoundTrip) {
  AgentRecord r = FullRecord(600);
  auto bytes = EncodeManifest(r);
  ASSERT_TRUE(bytes.ok());
  auto back = DecodeManifest(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
}

TEST(ManifestTest, NonUtf8TextRoundTrips) {
  AgentRecord r = FullRecord(2);
  r.text = std::string("a\xff\xc3", 3) + std::string(1, '\0') + "z";
  r.spans = {{0, 2}, {2, 5}};
  auto bytes = EncodeManifest(r);
  ASSERT_TRUE(bytes.ok());
  EXPECT_NE(bytes->find("text_base64"), std::string::npos);
  auto back = DecodeManifest(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->text, r.text);
  r.text = "\xc3\xa9t\xc3\xa9";  // valid UTF-8 stays readable
  bytes = EncodeManifest(r);
  ASSERT_TRUE(bytes.ok());
  EXPECT_NE(bytes->find("\"text\""), std::string::npos);
  EXPECT_EQ(DecodeManifest(*bytes)->text, r.text);
}

TEST(ManifestTest, InconsistentRecordsRejected) {
  AgentRecord r = FullRecord(300);
  r.spans.pop_back();
  EXPECT_EQ(EncodeManifest(r).status().code(), StatusCode::kInvalidArgument);
  r = FullRecord(300);
  r.spans[0].end = static_cast<uint32_t>(r.text.size() + 1);
  EXPECT_EQ(EncodeManifest(r).status().code(), StatusCode::kInvalidArgument);
  // A block list that does not match the tokens does not decode.
  r = FullRecord(300);
  r.blocks[1].id = r.blocks[0].id;
  auto bytes = EncodeManifest(r);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(DecodeManifest(*bytes).status().code(), StatusCode::kCorruption);
}

// The last prompt's tokenization (optional): written only when known, read
// back equal, absent in older manifests (golden files), and checked against
// the tokens and text like the spans are.
TEST(ManifestTest, PromptPrefixRoundTripsAndIsChecked) {
  AgentRecord r = FullRecord(300);
  ASSERT_EQ(EncodeManifest(r)->find("\"prompt\""), std::string::npos);  // unknown: not written
  r.prompt.n_tokens = 200;
  r.prompt.text_bytes = r.spans[199].end + 1;
  r.prompt.plain = {{0, 3}, {5, 9}};
  auto bytes = EncodeManifest(r);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = DecodeManifest(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->prompt, r.prompt);
  AgentRecord bad = r;
  bad.prompt.n_tokens = 301;  // more tokens than the record
  EXPECT_EQ(EncodeManifest(bad).status().code(), StatusCode::kInvalidArgument);
  bad = r;
  bad.prompt.text_bytes = r.spans[199].end - 1;  // its last token ends after the prompt
  EXPECT_EQ(EncodeManifest(bad).status().code(), StatusCode::kInvalidArgument);
  bad = r;
  bad.prompt.plain = {{5, 9}, {0, 3}};  // not sorted
  EXPECT_EQ(EncodeManifest(bad).status().code(), StatusCode::kInvalidArgument);
  bad = r;
  bad.prompt.plain = {{0, r.prompt.text_bytes + 1}};  // past the prompt
  EXPECT_EQ(EncodeManifest(bad).status().code(), StatusCode::kInvalidArgument);
}

// The head length (optional): written only when known, read back equal,
// inside the text.
TEST(ManifestTest, HeadBytesRoundTripAndAreChecked) {
  AgentRecord r = FullRecord(300);
  ASSERT_EQ(EncodeManifest(r)->find("\"head_bytes\""), std::string::npos);  // unknown: not written
  auto old = DecodeManifest(*EncodeManifest(r));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->head_bytes, 0u);
  r.head_bytes = 123;
  auto bytes = EncodeManifest(r);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = DecodeManifest(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->head_bytes, 123u);
  r.head_bytes = static_cast<uint32_t>(r.text.size() + 1);
  EXPECT_EQ(EncodeManifest(r).status().code(), StatusCode::kInvalidArgument);
}

TEST(ManifestTest, EveryBitFlipAndTruncationDetected) {
  AgentRecord r = FullRecord(4);
  auto bytes = EncodeManifest(r);
  ASSERT_TRUE(bytes.ok());
  for (size_t len = 0; len < bytes->size(); ++len) {
    ASSERT_EQ(DecodeManifest(bytes->substr(0, len)).status().code(), StatusCode::kCorruption) << len;
  }
  for (size_t pos = 0; pos < bytes->size(); ++pos) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string f = *bytes;
      f[pos] = static_cast<char>(f[pos] ^ (1 << bit));
      auto back = DecodeManifest(f);
      // A flip may only ever be harmless if the record is unchanged.
      if (back.ok()) {
        ASSERT_EQ(*back, r) << "flip at " << pos << " bit " << bit << " changed the record undetected";
      } else {
        ASSERT_EQ(back.status().code(), StatusCode::kCorruption);
      }
    }
  }
}

}  // namespace
}  // namespace agentkv
