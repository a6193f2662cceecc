// Architecture coverage of the KV export/import path on random-weight models
// at small shapes (written by synth/): dense GQA (llama), hybrid
// sliding-window (gemma3) and MLA + MoE (deepseek2). For each: prefill 3
// blocks + a partial one into slot 0, export to blocks, import into slot 2;
// next-token logits must be identical and 32 greedy tokens equal.
#include <gtest/gtest.h>

#include <chrono>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/context_size.h"
#include "engine/hybrid_oracle.h"
#include "engine/layer_gated_import.h"
#include "engine/model.h"
#include "engine/test_support.h"
#include "engine/tokenizer.h"
#include "synth/synth_model.h"

namespace agentkv::engine {
namespace {

// Each test writes its preset's random-weight GGUF (seed 7) and loads it;
// the file is removed at the end.
class ArchTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    preset_ = GetParam();
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();  // "Name/preset"
    for (char& c : test) c = c == '/' ? '_' : c;
    path_ = std::filesystem::temp_directory_path() / ("agentkv_arch_" + std::to_string(::getpid()) + "_" + test + ".gguf");
    synth::SynthOptions so;
    so.preset = preset_;
    so.output_path = path_.string();
    so.seed = 7;
    ASSERT_TRUE(synth::WriteSynthModel(so).ok());
    auto model = Model::Load(path_.string());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
  }
  void TearDown() override {
    model_.reset();
    std::filesystem::remove(path_);
  }

  // A context on the model (null, with a failure, if it cannot be created);
  // slot_kv unset: q4_0 slots; round: ContextOptions::round_slot_rows.
  std::unique_ptr<Context> NewContext(int n_slots, int slot_ctx, std::optional<KvType> slot_kv = std::nullopt,
                                      std::optional<bool> round = std::nullopt,
                                      std::optional<bool> device_slot_copy = std::nullopt) {
    ContextOptions o;
    o.device_slot_copy = device_slot_copy;
    o.round_slot_rows = round;
    o.n_slots = n_slots;
    o.slot_ctx = slot_ctx;
    o.n_threads = 2;
    o.slot_type_k = o.slot_type_v = slot_kv;
    auto ctx = Context::Create(*model_, o);
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    return ctx.ok() ? std::move(ctx).value() : nullptr;
  }
  // The first n tokens of the sample text's first `chars` characters (fewer if it has fewer).
  std::vector<int32_t> SampleTokens(size_t chars, size_t n) const {
    Tokenizer tok(*model_);
    std::vector<int32_t> tokens = tok.Tokenize(testing::SampleText(chars), true).tokens;
    if (tokens.size() > n) tokens.resize(n);
    return tokens;
  }

  std::string preset_;
  std::filesystem::path path_;
  std::unique_ptr<Model> model_;
};

TEST_P(ArchTest, ExportImportIsExactAndSpecMatchesTheExport) {
  const std::string& preset = preset_;
  auto ctx = NewContext(3, 2048);
  ASSERT_NE(ctx, nullptr);
  const ModelCacheSpec& spec = ctx->spec();

  const std::vector<int32_t> tokens = SampleTokens(12000, 3 * kBlockTokens + 80);
  ASSERT_EQ(tokens.size(), 3 * kBlockTokens + 80);
  std::vector<int32_t> head(tokens.begin(), tokens.end() - 1);
  ASSERT_TRUE(testing::Prefill(*ctx, 0, head).ok());

  auto blocks = ctx->ExportSlotBlocks(0);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  ASSERT_EQ(blocks->size(), 4u);
  std::vector<const KvBlock*> ptrs;
  size_t payload = 0;
  for (const auto& b : *blocks) {
    ptrs.push_back(&b);
    payload += b.payload_bytes();
  }
  // Full-attention layers hold every position; windowed layers only their window.
  uint64_t expected = head.size() * spec.BytesPerToken(spec.type_k, spec.type_v, /*exclude_swa=*/true);
  for (uint32_t l = 0; l < spec.n_layer(); ++l) {
    if (spec.layers[l].swa_window != 0) {
      expected += std::min<uint64_t>(head.size(), spec.layers[l].swa_window) *
                  spec.LayerBytesPerToken(l, spec.type_k, spec.type_v);
    }
  }
  EXPECT_EQ(payload, expected);
  // The default context's estimate, made before any context exists, is an
  // upper bound of what a slot really costs (exact for dense models).
  for (KvType t : {KvType::kQ4_0, KvType::kF16}) {
    EXPECT_GE(EstimateKvBytesPerToken(model_->info(), t, t), spec.BytesPerToken(t, t)) << KvTypeName(t);
  }
  std::printf("[ arch ] %s: %u layers, q4_0 %llu B/token, f16 %llu B/token (all layers)\n", preset.c_str(),
              spec.n_layer(), static_cast<unsigned long long>(spec.BytesPerToken(KvType::kQ4_0, KvType::kQ4_0)),
              static_cast<unsigned long long>(spec.BytesPerToken(KvType::kF16, KvType::kF16)));

  ASSERT_TRUE(ctx->ImportSlotBlocks(2, ptrs, head.size()).ok());
  auto again = ctx->ExportSlotBlocks(2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *blocks);
  // Tail exports (sliding-window layers included) give the same blocks.
  for (uint32_t first : {1u, 3u}) {
    auto tail = ctx->ExportSlotBlocks(0, first);
    ASSERT_TRUE(tail.ok()) << tail.status().ToString();
    EXPECT_EQ(*tail, std::vector<KvBlock>(blocks->begin() + first, blocks->end())) << "from block " << first;
  }

  auto a = testing::Prefill(*ctx, 0, {tokens.back()});
  auto b = testing::Prefill(*ctx, 2, {tokens.back()});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  auto ga = testing::GreedyDecode(*ctx, 0, *a, 32);
  auto gb = testing::GreedyDecode(*ctx, 2, *b, 32);
  ASSERT_TRUE(ga.ok() && gb.ok());
  EXPECT_EQ(*ga, *gb);

  // Truncated restores: exact for full-attention models; impossible (0) for
  // windowed layers, whose window at the cut was never exported...
  const uint32_t cut = 300;
  const bool any_window = spec.HasSlidingWindow();
  EXPECT_EQ(RestorablePrefix(ptrs, spec.shape, cut), any_window ? 0u : cut);
  // ...except a cut of one token (an EXACT match re-feeds the last token):
  // the export holds one window position more than going on needs.
  // Oracle: a cold prefill of the same tokens in the same batch shapes (the
  // head without its last token, then {last of head, next token} in one
  // batch) gives bit-identical logits. llama.cpp's CPU kernels pick their
  // path by batch shape (flash attention: tiled for 64+ query rows, per row
  // below, where Q is rounded to q8_0 against a q4_0 K), so slot 0, which
  // computed the last head token inside the long prefill, is compared within
  // a tolerance: 0.15 (the measured difference is 0.06-0.085 on logits of
  // magnitude ~4.5; a wrong restore differs by the logits' own scale) and the
  // same greedy token.
  const uint32_t n_exact = static_cast<uint32_t>(head.size()) - 1;
  EXPECT_EQ(RestorablePrefix(ptrs, spec.shape, n_exact), n_exact);
  const std::vector<int32_t> refeed = {head.back(), tokens.back()};
  ctx->ClearSlot(2);
  ASSERT_TRUE(testing::Prefill(*ctx, 2, std::vector<int32_t>(head.begin(), head.end() - 1)).ok());
  auto cold = testing::Prefill(*ctx, 2, refeed);
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  for (const bool resident : {false, true}) {
    // From blocks: import n - 1 positions. Resident: import all n, then cut one.
    ASSERT_TRUE(ctx->ImportSlotBlocks(1, ptrs, resident ? head.size() : n_exact).ok());
    if (resident) ASSERT_TRUE(ctx->TruncateSlot(1, n_exact).ok());
    auto c = testing::Prefill(*ctx, 1, refeed);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(*c, *cold) << (resident ? "resident" : "from blocks");
    EXPECT_LT(testing::MaxAbsDiff(*a, *c), 0.15f) << (resident ? "resident" : "from blocks");
    EXPECT_EQ(testing::Argmax(*a), testing::Argmax(*c));
    ctx->ClearSlot(1);
  }
  if (preset == "tiny-deepseek2") {
    EXPECT_EQ(spec.layers[0].v_width, 0u);  // MLA: K holds the latent, no V
  }
  if (preset == "tiny-gemma3") {
    EXPECT_TRUE(any_window);
  }
}

// A q4_0 cache's logits do not depend on how the prompt was split into
// batches (per-row vs grouped flash attention, patches/llama.cpp/0002), also
// with GQA, sliding windows and MLA: bit for bit on the CPU. On a GPU
// llama.cpp's CUDA kernels depend on the batch shape (and a K/V value that
// lands on the other side of a q4_0 rounding step moves later rows more), so
// there the split's logits are within kGpuSplitTolerance of the whole
// prompt's (stop 24 on the H200, tiny-llama: differences of ~0.03-0.06 in
// logits of magnitude ~1-2; a wrong split gives differences of the logits'
// own size) and the measured maximum is printed.
TEST_P(ArchTest, Q4PrefillLogitsDoNotDependOnBatchSplit) {
  constexpr float kGpuSplitTolerance = 0.5f;
  const std::string& preset = preset_;
  auto ctx = NewContext(2, 1024);
  ASSERT_NE(ctx, nullptr);
  ASSERT_EQ(ctx->spec().type_k, KvType::kQ4_0);
  const std::vector<int32_t> tokens = SampleTokens(6000, 300);
  ASSERT_EQ(tokens.size(), 300);
  auto whole = testing::PrefillInChunks(*ctx, 0, tokens, 300);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  for (size_t chunk : {1u, 7u, 64u}) {
    ctx->ClearSlot(0);
    auto split = testing::PrefillInChunks(*ctx, 0, tokens, chunk);
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    if (model_->info().n_gpu_layers == 0) {
      EXPECT_EQ(*split, *whole) << preset << ", chunks of " << chunk << ": max |diff| " << testing::MaxAbsDiff(*split, *whole);
    } else {
      const float diff = testing::MaxAbsDiff(*split, *whole);
      std::printf("%s on a GPU, chunks of %zu: max |logit diff| %.4f\n", preset.c_str(), chunk, diff);
      EXPECT_LT(diff, kGpuSplitTolerance) << preset << ", chunks of " << chunk;
    }
  }
}

// Hybrid slots (f16 slots, q4_0 blocks) whose rows are not rounded as they
// are written, on every architecture: the oracle of engine/hybrid_oracle.h
// (a restore is bit-identical to a cold slot whose cache went through the
// same q4_0 round trip; 32 equal greedy tokens), the at-rest layout and
// fingerprint equal to q4_0 slots', and a quality bound against the cold f16
// slot relative to pure q4_0 slots (below). The default rounds the rows:
// HybridRoundedRestoreEqualsTheResidentSlot.
TEST_P(ArchTest, HybridRestoreEqualsRoundTrippedColdSlot) {
  const std::string& preset = preset_;
  auto q4 = NewContext(3, 1024);
  auto ctx = NewContext(3, 1024, KvType::kF16, false);
  ASSERT_TRUE(q4 != nullptr && ctx != nullptr);
  const ModelCacheSpec& spec = ctx->spec();
  EXPECT_TRUE(spec.HybridSlots());
  EXPECT_EQ(spec.fingerprint, q4->spec().fingerprint);
  EXPECT_EQ(spec.shape, q4->spec().shape);

  const std::vector<int32_t> tokens = SampleTokens(8000, 2 * kBlockTokens + 80);
  ASSERT_EQ(tokens.size(), 2 * kBlockTokens + 80);
  const std::vector<int32_t> head(tokens.begin(), tokens.end() - 1);
  // Pure q4_0 slots, cold, in the same batch shapes: the error today's
  // servers have, the yardstick for the hybrid's.
  ASSERT_TRUE(testing::Prefill(*q4, 0, head).ok());
  auto q4_logits = testing::Prefill(*q4, 0, {tokens.back()});
  ASSERT_TRUE(q4_logits.ok());
  q4.reset();  // its memory back before the hybrid runs
  auto r = testing::RunHybridOracle(*ctx, head, tokens.back(), 32);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->blocks.size(), 3u);
  EXPECT_EQ(r->reexport, r->blocks);
  EXPECT_EQ(r->restored_logits, r->roundtrip_logits);
  EXPECT_EQ(r->restored_tokens, r->roundtrip_tokens);

  // Quality: the restored f16 slot's distance to the cold f16 slot is of
  // the order of pure q4_0 slots' (random weights make both large: logits of
  // magnitude ~4.5). Measured (max |diff| vs cold f16, hybrid / q4_0 slots):
  // printed below. The bound, 1.5x q4_0's + 0.1, catches a wrong row or a
  // misplaced block (differences of the logits' own scale), not rounding.
  const float diff = testing::MaxAbsDiff(r->cold_logits, r->restored_logits);
  const float q4_diff = testing::MaxAbsDiff(r->cold_logits, *q4_logits);
  std::printf("[ hybrid ] %s: max |logit diff| vs cold f16: restored hybrid %.4f, cold q4_0 slots %.4f\n",
              preset.c_str(), diff, q4_diff);
  EXPECT_LT(diff, 1.5f * q4_diff + 0.1f);
  EXPECT_GT(diff, 0.0f);
}

// The default hybrid slots (rows rounded through q4_0 as they are written,
// patch 0006) on every architecture, sliding-window and MLA caches
// included: the slot restored from its q4_0 blocks, the slot after its own
// export and import and the resident slot give the same logits and 32
// greedy tokens, bit for bit.
TEST_P(ArchTest, HybridRoundedRestoreEqualsTheResidentSlot) {
  auto ctx = NewContext(3, 1024, KvType::kF16);
  ASSERT_NE(ctx, nullptr);
  ASSERT_TRUE(ctx->RoundsSlotRowsToRest());
  const std::vector<int32_t> tokens = SampleTokens(8000, 2 * kBlockTokens + 80);
  ASSERT_EQ(tokens.size(), 2 * kBlockTokens + 80);
  const std::vector<int32_t> head(tokens.begin(), tokens.end() - 1);
  auto r = testing::RunHybridOracle(*ctx, head, tokens.back(), 32);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->reexport, r->blocks);
  EXPECT_EQ(r->restored_logits, r->cold_logits);
  EXPECT_EQ(r->roundtrip_logits, r->cold_logits);
  EXPECT_EQ(r->restored_run.tokens, r->cold_run.tokens);
  EXPECT_EQ(r->roundtrip_tokens, r->cold_run.tokens);
}

// The pipelined restore's gated import (engine/layer_gated_import.h) on
// every architecture. Where it applies (one cache section: dense GQA, MLA +
// MoE), a decode stopped before every layer until that layer's rows are in
// gives the logits of the same decode after the whole import, bit for bit,
// and llama.cpp called the layer hook for every layer (Complete; else every
// pipelined turn would start over cold). A sliding-window model's two
// caches are refused up front (Supports; the scheduler then restores the
// usual way) and by Start.
TEST_P(ArchTest, GatedImportEqualsAWholeImportWhereSupported) {
  const std::string& preset = preset_;
  auto ctx = NewContext(3, 1024, std::nullopt, std::nullopt, /*device_slot_copy=*/true);
  ASSERT_NE(ctx, nullptr);
  const ModelCacheSpec& spec = ctx->spec();
  const std::vector<int32_t> tokens = SampleTokens(8000, 2 * kBlockTokens + 80);
  ASSERT_EQ(tokens.size(), 2 * kBlockTokens + 80);
  const std::vector<int32_t> head(tokens.begin(), tokens.end() - 1);
  const auto n = static_cast<uint32_t>(head.size());
  ASSERT_TRUE(testing::Prefill(*ctx, 0, head).ok());
  auto blocks = ctx->ExportSlotBlocks(0);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  std::vector<const KvBlock*> ptrs;
  for (const auto& b : *blocks) ptrs.push_back(&b);
  std::vector<uint8_t> state(StateBytesForBlocks(ptrs, spec.layout(), n, 3));
  auto writer = BlocksStateWriter::Start(ptrs, spec.layout(), n, 3, state);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (size_t i = 0; i < writer->n_row_copies(); ++i) writer->CopyRows(i);

  if (!LayerGatedImport::Supports(spec.shape)) {
    EXPECT_EQ(preset, "tiny-gemma3");
    auto refused = LayerGatedImport::Start(*ctx, 2, state, *writer, nullptr);
    EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported) << refused.status().ToString();
      return;
  }
  // The reference: the whole import, then the next token.
  ASSERT_TRUE(ctx->ImportSlotBlocks(1, ptrs, n).ok());
  auto whole = testing::Prefill(*ctx, 1, {tokens.back()});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();

  // A device copy into the target still queued in llama.cpp (CopySlotPrefix)
  // must be applied before the import writes rows, not by the gated decode.
  ASSERT_TRUE(ctx->CopySlotPrefix(0, 2, static_cast<int32_t>(n)).ok());
  ASSERT_EQ(ctx->slot_copy_counts().device, 1u);
  auto import = LayerGatedImport::Start(*ctx, 2, state, *writer, nullptr);
  ASSERT_TRUE(import.ok()) << import.status().ToString();
  EXPECT_EQ(ctx->slot_copy_counts().applied, 1u);
  struct EveryLayer : LayerGate {  // stops before every layer, imports it there
    explicit EveryLayer(LayerGatedImport& in) : in(in) {}
    bool WaitLayer(int il) override {
      ++stops;
      return in.ImportWhenLanded(il, std::chrono::seconds(30));
    }
    LayerGatedImport& in;
    uint32_t stops = 0;
  } gate(**import);
  BatchItem item{2, tokens.back(), static_cast<int32_t>(n), true};
  ASSERT_TRUE(ctx->DecodeGated({&item, 1}, &gate).ok());
  EXPECT_EQ(gate.stops, spec.n_layer());
  EXPECT_TRUE((*import)->Complete());  // every layer was called back, so imported before it was computed
  const std::vector<float> gated(ctx->Logits(0).begin(), ctx->Logits(0).end());
  EXPECT_EQ(gated, *whole);
}

// CopySlotPrefix on the device (llama_memory_seq_cp) on every architecture,
// sliding-window (gemma3) and MLA (deepseek2, no V rows) included: exported
// right after the copy, before any decode ran llama.cpp's queued row copy,
// dst's state and blocks equal the staging route's (same status where a
// window forbids the cut), and dst continues exactly like a cold prefill.
TEST_P(ArchTest, DeviceSlotCopyEqualsTheStagingRoute) {
  const std::vector<int32_t> tokens = SampleTokens(12000, 3 * kBlockTokens + 80);
  const auto len = static_cast<int32_t>(tokens.size()) - 16;
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + len);
  for (int32_t n : {len / 2, len - 1, len}) {
    SCOPED_TRACE(preset_ + ", n " + std::to_string(n));
    auto dev = NewContext(3, 2048, std::nullopt, std::nullopt, true);
    auto staged = NewContext(3, 2048, std::nullopt, std::nullopt, false);
    ASSERT_TRUE(dev && staged);
    ASSERT_TRUE(testing::Prefill(*dev, 0, head).ok());
    ASSERT_TRUE(testing::Prefill(*staged, 0, head).ok());
    const Status sd = dev->CopySlotPrefix(0, 1, n);
    const Status ss = staged->CopySlotPrefix(0, 1, n);
    EXPECT_EQ(sd.code(), ss.code()) << sd.ToString() << " vs " << ss.ToString();
    // Windowed layers: on the device for the whole slot only (Context::CopySlotPrefix).
    const bool on_device = !dev->spec().HasSlidingWindow() || n == len;
    EXPECT_EQ(dev->slot_copy_counts().device, on_device ? 1u : 0u);
    if (!ss.ok()) {
      EXPECT_EQ(dev->SlotLength(1), 0) << "a failed copy clears dst";
      continue;
    }
    auto state_dev = dev->ExportSlotState(1);
    auto state_staged = staged->ExportSlotState(1);
    ASSERT_TRUE(state_dev.ok() && state_staged.ok());
    EXPECT_EQ(dev->slot_copy_counts().applied, on_device ? 1u : 0u);
    EXPECT_TRUE(*state_dev == *state_staged) << "exported states differ";
    auto blocks_dev = dev->ExportSlotBlocks(1);
    auto blocks_staged = staged->ExportSlotBlocks(1);
    ASSERT_TRUE(blocks_dev.ok() && blocks_staged.ok());
    EXPECT_TRUE(*blocks_dev == *blocks_staged) << "exported blocks differ";

    std::vector<int32_t> suffix(tokens.begin() + n, tokens.end());
    auto copied = testing::Prefill(*dev, 1, suffix);
    auto cold = testing::Prefill(*dev, 2, tokens);
    ASSERT_TRUE(copied.ok() && cold.ok());
    if (on_device || !dev->spec().HasSlidingWindow()) {
      EXPECT_EQ(*copied, *cold) << "max |diff| " << testing::MaxAbsDiff(*copied, *cold);
    } else {
      // Known gap (stop 24, CPU): a windowed model's slot copied through host memory continues within
      // kWindowedStagedTolerance of a cold prefill, not bit for bit (tiny-gemma3, a cut at 831 of 832: max
      // |diff| 0.071; the staging route alone shows the same for a whole-slot copy, the device copy does
      // not; RestoredSlotContinuesLikeTheResidentOne isolates it). docs/engine.md "Exactness" lists it; the
      // greedy tokens below must still be equal.
      constexpr float kWindowedStagedTolerance = 0.15f;
      EXPECT_LT(testing::MaxAbsDiff(*copied, *cold), kWindowedStagedTolerance);
    }
    auto gd = testing::GreedyDecode(*dev, 1, *copied, 16);
    auto gc = testing::GreedyDecode(*dev, 2, *cold, 16);
    ASSERT_TRUE(gd.ok() && gc.ok());
    EXPECT_EQ(*gd, *gc);
  }
}

// A slot restored from its exported state continues like the resident slot:
// bit for bit for full-attention models whatever follows, and for
// sliding-window models when one or two tokens follow (a decode); a longer
// chunk after a windowed restore is only tolerance-equal on CPU (found at
// stop 24; tiny-gemma3, 831 tokens then 8: max |diff| ~0.06). Cause (built
// with context.cc's kSwaFull = true, no ring, the difference is 0): the
// windowed cache is a ring that overwrites its oldest cells as a chunk
// arrives, so the resident slot's new rows land before its window cells in
// cell order while the restored slot (cells imported in a contiguous run)
// appends them; the flash-attention sums run in cell order. docs/engine.md
// "Exactness" lists it. If this starts to be exact, tighten the test.
TEST_P(ArchTest, RestoredSlotContinuesLikeTheResidentOne) {
  const std::vector<int32_t> tokens = SampleTokens(12000, 3 * kBlockTokens + 80);
  const std::vector<int32_t> head(tokens.begin(), tokens.end() - 17);
  for (int k : {1, 2, 16}) {
    SCOPED_TRACE(preset_ + ", then " + std::to_string(k));
    auto ctx = NewContext(2, 2048);
    ASSERT_NE(ctx, nullptr);
    ASSERT_TRUE(testing::Prefill(*ctx, 0, head).ok());
    auto state = ctx->ExportSlotState(0);
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    ASSERT_TRUE(ctx->ImportSlotState(1, *state).ok());
    const std::vector<int32_t> next(tokens.end() - 17, tokens.end() - 17 + k);
    auto resident = testing::Prefill(*ctx, 0, next);
    auto restored = testing::Prefill(*ctx, 1, next);
    ASSERT_TRUE(resident.ok() && restored.ok());
    const float diff = testing::MaxAbsDiff(*resident, *restored);
    if (!ctx->spec().HasSlidingWindow() || k <= 2) {
      EXPECT_EQ(*restored, *resident) << "max |diff| " << diff;
    } else {
      std::printf("%s: a windowed restore then %d tokens: max |diff| %.4f vs the resident slot\n", preset_.c_str(),
                  k, diff);
      EXPECT_LT(diff, 0.15f);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, ArchTest, ::testing::Values("tiny-llama", "tiny-gemma3", "tiny-deepseek2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

}  // namespace
}  // namespace agentkv::engine
