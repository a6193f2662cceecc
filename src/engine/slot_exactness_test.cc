// Exactness of the default CPU configuration (f16 slots over q4_0 blocks) on
// the bundled model, bit for bit (docs/engine.md, "Exactness"):
// - a sequence's logits do not depend on what else shares its batch
//   (patch 0005: batch-invariant f16 flash attention);
// - a slot restored from its q4_0 blocks equals the resident slot it
//   replaces (patch 0006: rows rounded through q4_0 as they are written).
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/bundled_model_fixture.h"
#include "engine/context.h"
#include "engine/hybrid_oracle.h"
#include "engine/tokenizer.h"

namespace agentkv::engine {
namespace {

using testing::BundledModelPath;
using testing::SampleText;

class SlotExactnessTest : public testing::BundledModelTest {
 protected:
  // f16 slots over q4_0 blocks: what --slot-kv auto gives on CPU.
  std::unique_ptr<Context> MakeContext(std::optional<bool> round = std::nullopt, int slots = 3) {
    ContextOptions o;
    o.n_slots = slots;
    o.slot_ctx = 2048;
    o.type_k = o.type_v = KvType::kQ4_0;
    o.slot_type_k = o.slot_type_v = KvType::kF16;
    o.round_slot_rows = round;
    o.n_threads = 2;
    auto c = Context::Create(*model_, o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  std::vector<int32_t> Tokens(size_t offset, size_t n) {
    Tokenizer tok(*model_);
    auto t = tok.Tokenize(SampleText(offset * 8 + n * 8), true);
    EXPECT_GE(t.tokens.size(), offset + n);
    if (t.tokens.size() < offset + n) return {};
    return {t.tokens.begin() + offset, t.tokens.begin() + offset + n};
  }
};

TEST_F(SlotExactnessTest, RoundingIsTheDefaultForF16SlotsOverQ4_0Only) {
  EXPECT_TRUE(SlotRowsCanRoundToRest(KvType::kF16, KvType::kF16, KvType::kQ4_0, KvType::kQ4_0));
  EXPECT_FALSE(SlotRowsCanRoundToRest(KvType::kF16, KvType::kF16, KvType::kQ8_0, KvType::kQ8_0));
  EXPECT_FALSE(SlotRowsCanRoundToRest(KvType::kQ4_0, KvType::kQ4_0, KvType::kQ4_0, KvType::kQ4_0));
  EXPECT_FALSE(SlotRowsCanRoundToRest(KvType::kF16, KvType::kQ4_0, KvType::kQ4_0, KvType::kQ4_0));
  auto rounded = MakeContext(std::nullopt, 1);
  auto plain = MakeContext(false, 1);
  ASSERT_TRUE(rounded && plain);
  EXPECT_TRUE(rounded->RoundsSlotRowsToRest());
  EXPECT_FALSE(plain->RoundsSlotRowsToRest());
  // Same bytes at rest, different outputs.
  EXPECT_EQ(rounded->spec().fingerprint, plain->spec().fingerprint);
  EXPECT_NE(rounded->spec().OutputFingerprint(), plain->spec().OutputFingerprint());
  // Asked for where it cannot hold: refused, not ignored.
  ContextOptions o;
  o.n_slots = 1;
  o.slot_ctx = 256;
  o.type_k = o.type_v = KvType::kQ8_0;
  o.slot_type_k = o.slot_type_v = KvType::kF16;
  o.round_slot_rows = true;
  EXPECT_EQ(Context::Create(*model_, o).status().code(), StatusCode::kInvalidArgument);
}

// Sequence A (600 tokens, past the 512 cells where upstream's lone decode
// splits the KV over threads) is prefilled and then decoded (teacher-forced)
// alone in one context, and in another context in chunks of 50 that share
// each batch with decode tokens of B and C (other slots, other lengths),
// then decoded batched with them: A's logits are the same bits.
TEST_F(SlotExactnessTest, F16SlotLogitsDoNotDependOnTheBatch) {
  constexpr size_t kHead = 600, kSteps = 12;
  const std::vector<int32_t> a = Tokens(0, kHead + kSteps);
  const std::vector<int32_t> b = Tokens(700, 300 + 100);
  const std::vector<int32_t> c = Tokens(1100, 900 + 100);
  ASSERT_FALSE(a.empty() || b.empty() || c.empty());

  auto alone = MakeContext();
  ASSERT_TRUE(alone);
  std::vector<std::vector<float>> want;  // head's last token, then each step
  const std::vector<int32_t> head(a.begin(), a.begin() + kHead);
  auto l = testing::Prefill(*alone, 0, head);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  want.push_back(*l);
  for (size_t i = kHead; i < a.size() - 1; ++i) {
    BatchItem item{0, a[i], static_cast<int32_t>(i), true};
    ASSERT_TRUE(alone->Decode({&item, 1}).ok());
    auto logits = alone->Logits(0);
    want.emplace_back(logits.begin(), logits.end());
  }

  auto batched = MakeContext();
  ASSERT_TRUE(batched);
  ASSERT_TRUE(testing::Prefill(*batched, 1, {b.begin(), b.begin() + 300}).ok());
  ASSERT_TRUE(testing::Prefill(*batched, 2, {c.begin(), c.begin() + 900}).ok());
  int32_t pos_b = 300, pos_c = 900;
  std::vector<std::vector<float>> got;
  auto step = [&](size_t from, size_t to) -> bool {  // A's tokens [from, to) + one of B's and C's
    std::vector<BatchItem> items;
    items.push_back({1, b[pos_b], pos_b, false});
    for (size_t i = from; i < to; ++i) items.push_back({0, a[i], static_cast<int32_t>(i), i + 1 == to});
    items.push_back({2, c[pos_c], pos_c, false});
    ++pos_b, ++pos_c;
    if (!batched->Decode(items).ok()) return false;
    auto logits = batched->Logits(static_cast<int>(items.size()) - 2);
    if (to >= kHead) got.emplace_back(logits.begin(), logits.end());
    return true;
  };
  for (size_t i = 0; i < kHead; i += 50) ASSERT_TRUE(step(i, std::min(i + 50, kHead)));
  for (size_t i = kHead; i < a.size() - 1; ++i) ASSERT_TRUE(step(i, i + 1));

  ASSERT_EQ(got.size(), want.size());
  size_t equal = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "step " << i << ": max |diff| " << testing::MaxAbsDiff(got[i], want[i]);
    equal += got[i] == want[i];
  }
  std::printf("[ exact ] %zu of %zu logit vectors bit-identical alone vs batched\n", equal, want.size());
}

// The resident slot (prefilled, never left), the same agent restored from
// its q4_0 blocks into another slot, and the slot after its own export and
// import: the same logits and 32 greedy tokens, bit for bit. The rounding
// costs what q4_0 at rest costs anyway: within the hybrid bound of
// hybrid_slots_test.cc against f16 slots that keep unrounded rows.
TEST_F(SlotExactnessTest, RestoredF16SlotEqualsTheResidentSlot) {
  auto ctx = MakeContext();
  ASSERT_TRUE(ctx);
  ASSERT_TRUE(ctx->RoundsSlotRowsToRest());
  std::vector<int32_t> t = Tokens(0, 3 * kBlockTokens + 77);
  ASSERT_FALSE(t.empty());
  const std::vector<int32_t> head(t.begin(), t.end() - 1);
  auto r = testing::RunHybridOracle(*ctx, head, t.back(), 32);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->reexport, r->blocks);
  EXPECT_EQ(r->restored_logits, r->cold_logits);  // cold = the resident slot
  EXPECT_EQ(r->roundtrip_logits, r->cold_logits);
  EXPECT_EQ(r->restored_run.tokens, r->cold_run.tokens);
  EXPECT_EQ(r->roundtrip_tokens, r->cold_run.tokens);

  auto plain = MakeContext(false, 1);
  ASSERT_TRUE(plain);
  ContextOptions o4 = plain->options();
  o4.slot_type_k = o4.slot_type_v = std::nullopt;  // q4_0 slots
  o4.round_slot_rows = std::nullopt;
  auto q4_slots = Context::Create(*model_, o4);
  ASSERT_TRUE(q4_slots.ok());
  ASSERT_TRUE(testing::Prefill(*plain, 0, head).ok());
  ASSERT_TRUE(testing::Prefill(**q4_slots, 0, head).ok());
  auto unrounded = testing::Prefill(*plain, 0, {t.back()});
  auto q4_logits = testing::Prefill(**q4_slots, 0, {t.back()});
  ASSERT_TRUE(unrounded.ok() && q4_logits.ok());
  const float diff = testing::MaxAbsDiff(*unrounded, r->cold_logits);
  const float q4_diff = testing::MaxAbsDiff(*unrounded, *q4_logits);
  std::printf("[ exact ] max |logit diff| vs unrounded f16 slots: rounded %.4f, q4_0 slots %.4f\n", diff, q4_diff);
  EXPECT_GT(diff, 0.0f);  // the rounding is on (else this test checks nothing)
  EXPECT_LT(diff, 1.5f * q4_diff + 0.1f);
  EXPECT_EQ(testing::Argmax(*unrounded), testing::Argmax(r->cold_logits));
}

}  // namespace
}  // namespace agentkv::engine
