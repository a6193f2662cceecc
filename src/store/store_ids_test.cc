#include "store/store_ids.h"

#include <gtest/gtest.h>

#include "store/kv_block.h"

namespace agentkv {
namespace {

TEST(StoreIdsTest, ValidNames) {
  for (const char* ok : {"a", "agent-1", "A.b_c-9", "x..y"}) EXPECT_TRUE(ValidateName("agent id", ok).ok()) << ok;
  EXPECT_TRUE(ValidateName("agent id", std::string(128, 'a')).ok());
}

TEST(StoreIdsTest, BadNamesRejected) {
  for (std::string bad : {std::string(""), std::string("."), std::string(".."), std::string("../x"),
                          std::string("a/b"), std::string("a\\b"), std::string(".hidden"), std::string("a b"),
                          std::string("a\0b", 3), std::string("\xc3\xa9"), std::string(129, 'a'),
                          std::string(10240, 'x')}) {
    Status st = ValidateName("agent id", bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad.substr(0, 20);
    EXPECT_LT(st.message().size(), 300u);  // a 10 KB id is not echoed back
  }
}

TEST(StoreIdsTest, NameHashIsLowercaseHexAndCaseSensitive) {
  EXPECT_TRUE(IsBlockId(NameHash("Agent")));
  EXPECT_NE(NameHash("Agent"), NameHash("agent"));
}

TEST(StoreIdsTest, BlockIdsChainAndDependOnFingerprint) {
  std::vector<int32_t> a(600), b(600);
  for (int i = 0; i < 600; ++i) a[i] = b[i] = i;
  b[300] = -1;  // differs in block 1
  auto ia = ComputeBlockIds("fp", a), ib = ComputeBlockIds("fp", b);
  ASSERT_EQ(ia.size(), 3u);
  EXPECT_EQ(ia[0], ib[0]);
  EXPECT_NE(ia[1], ib[1]);
  EXPECT_NE(ia[2], ib[2]);  // same tokens in block 2, different parent
  EXPECT_NE(ComputeBlockIds("fp2", a)[0], ia[0]);
  for (const auto& id : ia) EXPECT_TRUE(IsBlockId(id));
  // The partial tail gets a new id when it grows; full blocks keep theirs.
  a.push_back(7);
  auto grown = ComputeBlockIds("fp", a);
  EXPECT_EQ(grown[1], ia[1]);
  EXPECT_NE(grown[2], ia[2]);
  EXPECT_TRUE(ComputeBlockIds("fp", {}).empty());
  EXPECT_EQ(BlockId("", "fp", std::span<const int32_t>(a.data(), kBlockTokens)), ia[0]);
}

}  // namespace
}  // namespace agentkv
