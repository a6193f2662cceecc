// LayerGatedImport + Context::DecodeGated: a decode whose gate imports each
// layer's rows as they land gives the logits and greedy tokens of a decode
// after the whole import (same batch shape, same slot: bit for bit), really
// runs while rows are still landing, and gives way when they do not come.
#include "engine/layer_gated_import.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/bundled_model_fixture.h"
#include "engine/test_support.h"
#include "engine/tokenizer.h"

namespace agentkv::engine {
namespace {

using testing::BundledModelTest;

// Rows that come in one by one (a disk read landing in the state): a feeder
// thread releases row copy i, i + 1, ... every `gap` (Start), or Release
// releases them all; a range has landed once every row copy overlapping it
// is released.
class SlowRows : public RowSource {
 public:
  SlowRows(const BlocksStateWriter& writer, std::chrono::microseconds gap) : writer_(writer), gap_(gap) {}
  ~SlowRows() override {
    if (feeder_.joinable()) feeder_.join();
  }
  void Start() {
    feeder_ = std::thread([this] {
      for (size_t i = 0; i < writer_.n_row_copies(); ++i) {
        std::this_thread::sleep_for(gap_);
        Set(i + 1);
      }
    });
  }
  void Release() { Set(writer_.n_row_copies()); }
  bool AllReleased() const {
    std::lock_guard<std::mutex> lock(mu_);
    return released_ == writer_.n_row_copies();
  }
  bool Landed(size_t offset, size_t size) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return released_ >= Need(offset, size);
  }
  bool WaitLanded(size_t offset, size_t size, std::chrono::microseconds timeout) const override {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return released_ >= Need(offset, size); });
  }
  bool Final() const override { return AllReleased(); }

 private:
  void Set(size_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = n;
    }
    cv_.notify_all();
  }
  size_t Need(size_t offset, size_t size) const {  // 1 + the last row copy overlapping the range
    size_t need = 0;
    for (size_t i = 0; i < writer_.n_row_copies(); ++i) {
      const auto [lo, hi] = writer_.RowBytes(i);
      if (lo < offset + size && offset < hi) need = i + 1;
    }
    return need;
  }
  const BlocksStateWriter& writer_;
  const std::chrono::microseconds gap_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  size_t released_ = 0;  // GUARDED_BY(mu_)
  std::thread feeder_;
};

// The gate the scheduler's is built like: imports a layer if its rows are
// in, else stops and waits for them (at most `wait`); counts what it did.
class ImportingGate : public LayerGate {
 public:
  ImportingGate(LayerGatedImport& import, std::chrono::microseconds wait, const SlowRows* rows = nullptr)
      : import_(import), wait_(wait), rows_(rows) {}
  bool LayerReady(int il) override {
    const bool in = import_.ImportIfLanded(il);
    ready_ += in;
    return in;
  }
  bool WaitLayer(int il) override {
    ++waits_;
    if (rows_ != nullptr && !rows_->AllReleased()) ++early_;
    return import_.ImportWhenLanded(il, wait_);
  }
  int ready_ = 0, waits_ = 0, early_ = 0;

 private:
  LayerGatedImport& import_;
  const std::chrono::microseconds wait_;
  const SlowRows* rows_;
};

class LayerGatedImportTest : public BundledModelTest {
 protected:
  static constexpr uint32_t kTokens = 700;

  void SetUp() override {
    BundledModelTest::SetUp();
    ContextOptions o;
    o.n_slots = 2;
    o.slot_ctx = 1024;
    o.n_threads = 2;
    auto c = Context::Create(*model_, o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ctx_ = std::move(c).value();
    Tokenizer tok(*model_);
    tokens_ = tok.Tokenize(testing::SampleText(5000), true).tokens;
    tokens_.resize(kTokens);
    ASSERT_TRUE(testing::Prefill(*ctx_, 0, tokens_).ok());
    auto blocks = ctx_->ExportSlotBlocks(0);
    ASSERT_TRUE(blocks.ok());
    blocks_ = std::move(blocks).value();
    for (const KvBlock& b : blocks_) ptrs_.push_back(&b);
    ctx_->ClearSlot(0);

    // The reference: the whole import, then the last token again.
    ASSERT_TRUE(ctx_->ImportSlotBlocks(1, ptrs_, kTokens).ok());
    ASSERT_TRUE(ctx_->TruncateSlot(1, kTokens - 1).ok());
    ASSERT_TRUE(ctx_->Decode(LastToken()).ok());
    ref_logits_.assign(ctx_->Logits(0).begin(), ctx_->Logits(0).end());
    auto run = testing::GreedyDecode(*ctx_, 1, ref_logits_, 16);
    ASSERT_TRUE(run.ok());
    ref_tokens_ = std::move(run).value();
    // Clearing a slot keeps its rows' bytes: overwrite them with another
    // text's, so that a decode that read rows before their import would see
    // those, not the reference's.
    ctx_->ClearSlot(1);
    std::vector<int32_t> other(tokens_.rbegin(), tokens_.rend());
    ASSERT_TRUE(testing::Prefill(*ctx_, 1, other).ok());
    ctx_->ClearSlot(1);

    // The state the gated imports read.
    state_.resize(StateBytesForBlocks(ptrs_, ctx_->spec().layout(), kTokens, 2));
    auto writer = BlocksStateWriter::Start(ptrs_, ctx_->spec().layout(), kTokens, 2, state_);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    writer_.emplace(std::move(writer).value());
    for (size_t i = 0; i < writer_->n_row_copies(); ++i) writer_->CopyRows(i);
  }

  std::span<const BatchItem> LastToken() {
    item_ = {1, tokens_[kTokens - 1], static_cast<int32_t>(kTokens - 1), true};
    return {&item_, 1};
  }
  std::vector<float> Logits() const { return {ctx_->Logits(0).begin(), ctx_->Logits(0).end()}; }

  std::unique_ptr<Context> ctx_;
  std::vector<int32_t> tokens_;
  std::vector<KvBlock> blocks_;
  std::vector<const KvBlock*> ptrs_;
  std::vector<float> ref_logits_;
  std::vector<int32_t> ref_tokens_;
  std::vector<uint8_t> state_;
  std::optional<BlocksStateWriter> writer_;
  BatchItem item_;
};

TEST_F(LayerGatedImportTest, GatedDecodeEqualsADecodeAfterTheWholeImport) {
  SlowRows rows(*writer_, std::chrono::microseconds(1500));
  auto import = LayerGatedImport::Start(*ctx_, 1, state_, *writer_, &rows);
  ASSERT_TRUE(import.ok()) << import.status().ToString();
  ASSERT_TRUE(ctx_->TruncateSlot(1, kTokens - 1).ok());
  rows.Start();
  ImportingGate gate(**import, std::chrono::seconds(30), &rows);
  ASSERT_TRUE(ctx_->DecodeGated(LastToken(), &gate).ok());
  EXPECT_TRUE((*import)->Complete());
  EXPECT_EQ(gate.ready_ + gate.waits_, model_->info().n_layer);
  // The decode ran while rows were still coming (each row copy 1.5 ms
  // apart; the model's layers' K rows come first, so at least layer 0
  // waits for rows to come).
  EXPECT_GT(gate.early_, 0);
  EXPECT_EQ(Logits(), ref_logits_);
  auto run = testing::GreedyDecode(*ctx_, 1, Logits(), 16);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(*run, ref_tokens_);
}

// Layers whose rows are in when the decode asks are imported there and then
// and do not stop it: the decode runs through as one piece.
TEST_F(LayerGatedImportTest, LayersWhoseRowsAreInDoNotStopTheDecode) {
  auto import = LayerGatedImport::Start(*ctx_, 1, state_, *writer_, nullptr);
  ASSERT_TRUE(import.ok()) << import.status().ToString();
  ASSERT_TRUE(ctx_->TruncateSlot(1, kTokens - 1).ok());
  ImportingGate gate(**import, std::chrono::seconds(30));
  ASSERT_TRUE(ctx_->DecodeGated(LastToken(), &gate).ok());
  EXPECT_EQ(gate.waits_, 0);
  EXPECT_EQ(gate.ready_, model_->info().n_layer);
  EXPECT_TRUE((*import)->Complete());
  EXPECT_EQ(Logits(), ref_logits_);
}

// The rows a layer-by-layer import leaves in the slot are those of a plain
// import of the same blocks, bit for bit.
TEST_F(LayerGatedImportTest, TheImportedSlotEqualsAPlainImportBitForBit) {
  auto import = LayerGatedImport::Start(*ctx_, 1, state_, *writer_, nullptr);
  ASSERT_TRUE(import.ok()) << import.status().ToString();
  EXPECT_EQ(ctx_->SlotLength(1), static_cast<int32_t>(kTokens));
  EXPECT_TRUE((*import)->ImportLanded());
  import->reset();
  auto gated = ctx_->ExportSlotBlocks(1);
  ASSERT_TRUE(gated.ok()) << gated.status().ToString();
  ASSERT_TRUE(ctx_->ImportSlotBlocks(0, ptrs_, kTokens).ok());
  auto plain = ctx_->ExportSlotBlocks(0);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(*gated, *plain);
  EXPECT_EQ(*gated, blocks_);
}

// Rows held back: the gate gives way after its bounded wait, the decode is
// abandoned without them; once they land the import completes and a plain
// decode (the abandoned position cut) gives the reference.
TEST_F(LayerGatedImportTest, HeldRowsMakeTheGateGiveWayWithoutWaitingForThem) {
  SlowRows rows(*writer_, std::chrono::microseconds(0));  // nothing released until Release()
  auto import = LayerGatedImport::Start(*ctx_, 1, state_, *writer_, &rows);
  ASSERT_TRUE(import.ok()) << import.status().ToString();
  ASSERT_TRUE(ctx_->TruncateSlot(1, kTokens - 1).ok());
  ImportingGate gate(**import, std::chrono::milliseconds(5));
  const auto start = std::chrono::steady_clock::now();
  Status s = ctx_->DecodeGated(LastToken(), &gate);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  EXPECT_EQ(gate.waits_, 1);  // the first layer gave way; the rest of the graph was not gated
  EXPECT_FALSE((*import)->Complete());
  EXPECT_FALSE((*import)->ImportLanded());
  EXPECT_FALSE((*import)->WaitNextLayer(std::chrono::milliseconds(1)));
  rows.Release();
  EXPECT_TRUE((*import)->WaitNextLayer(std::chrono::milliseconds(1)));
  EXPECT_TRUE((*import)->ImportLanded());
  ASSERT_TRUE(ctx_->TruncateSlot(1, kTokens - 1).ok());
  ASSERT_TRUE(ctx_->Decode(LastToken()).ok());
  EXPECT_EQ(Logits(), ref_logits_);
}

TEST_F(LayerGatedImportTest, ARejectedStateFailsStartAndLeavesTheSlotEmpty) {
  std::vector<uint8_t> bad = state_;
  bad[0] ^= 0xff;  // the magic
  auto import = LayerGatedImport::Start(*ctx_, 1, bad, *writer_, nullptr);
  EXPECT_EQ(import.status().code(), StatusCode::kCorruption) << import.status().ToString();
  EXPECT_EQ(ctx_->SlotLength(1), 0);
}

}  // namespace
}  // namespace agentkv::engine
