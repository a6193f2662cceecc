#include "store/store_ids.h"

#include <gtest/gtest.h>

#include "store/kv_block.h"

namespace agentkv {
namespace {

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
