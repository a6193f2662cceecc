// RestoreSlot / RestorableTokens with the bundled model: an exported slot's
// blocks, restored into another slot, continue as the original does.
#include "sched/restore_slot.h"

#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/test_support.h"
#include "engine/tokenizer.h"
#include "store/store_ids.h"

namespace agentkv::sched {
namespace {

class RestoreSlotTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = std::move(engine::Model::Load(engine::testing::BundledModelPath())).value().release();
  }
  static void TearDownTestSuite() { delete model_; }

  void SetUp() override {
    engine::ContextOptions o;
    o.n_slots = 2;
    o.slot_ctx = 1024;
    o.n_threads = 2;
    ctx_ = std::move(engine::Context::Create(*model_, o)).value();
    engine::Tokenizer tok(*model_);
    tokens_ = tok.Tokenize(engine::testing::SampleText(2000), true).tokens;
    ASSERT_GT(tokens_.size(), 300u);  // more than one block
    auto logits = engine::testing::Prefill(*ctx_, 0, tokens_);
    ASSERT_TRUE(logits.ok());
    last_logits_ = *logits;
    auto exported = ctx_->ExportSlotBlocks(0);
    ASSERT_TRUE(exported.ok());
    const auto ids = ComputeBlockIds(ctx_->spec().fingerprint, tokens_);
    ASSERT_EQ(exported->size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      blocks_.push_back({ids[i], std::make_shared<KvBlock>(std::move((*exported)[i]))});
    }
  }

  static engine::Model* model_;
  std::unique_ptr<engine::Context> ctx_;
  std::vector<int32_t> tokens_;
  std::vector<float> last_logits_;
  std::vector<PoolBlock> blocks_;
};
engine::Model* RestoreSlotTest::model_ = nullptr;

TEST_F(RestoreSlotTest, BlocksOfTheTokensRestoreThemAll) {
  std::vector<PoolBlock> blocks = blocks_;
  EXPECT_EQ(RestorableTokens(&blocks, tokens_, ctx_->spec()), tokens_.size());
  EXPECT_EQ(blocks.size(), blocks_.size());
}

TEST_F(RestoreSlotTest, OnlyTheBlocksBeforeADifferentTokenCount) {
  std::vector<int32_t> other = tokens_;
  other[300] = other[300] == 1 ? 2 : 1;  // in the second block
  std::vector<PoolBlock> blocks = blocks_;
  const uint32_t n = RestorableTokens(&blocks, other, ctx_->spec());
  EXPECT_EQ(blocks.size(), 1u);
  EXPECT_LE(n, 256u);
  EXPECT_GT(n, 0u);
  std::vector<PoolBlock> none;
  EXPECT_EQ(RestorableTokens(&none, tokens_, ctx_->spec()), 0u);
}

TEST_F(RestoreSlotTest, ARestoredSlotContinuesAsTheOriginal) {
  const uint32_t n_keep = static_cast<uint32_t>(tokens_.size() - 1);
  bool landed = true;
  ASSERT_TRUE(RestoreSlot(*ctx_, 1, blocks_, n_keep, nullptr, &landed).ok());
  EXPECT_FALSE(landed);  // no landing: from the blocks
  EXPECT_EQ(ctx_->SlotLength(1), static_cast<int32_t>(n_keep));
  auto logits = engine::testing::Prefill(*ctx_, 1, {tokens_.back()});
  ASSERT_TRUE(logits.ok());
  // The same KV, the last token computed alone instead of in a batch.
  EXPECT_LT(engine::testing::MaxAbsDiff(*logits, last_logits_), 0.15f);
  EXPECT_EQ(engine::testing::Argmax(*logits), engine::testing::Argmax(last_logits_));
}

}  // namespace
}  // namespace agentkv::sched
