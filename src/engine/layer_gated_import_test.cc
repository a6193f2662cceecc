// LayerGatedImport + Context::DecodeGated: a decode that runs while its
// slot's rows are still being imported gives the logits and greedy tokens of
// a decode after the whole import (same batch shape, same slot: bit for
// bit), and really runs beside the import.
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
// thread releases row copy i, i + 1, ... every `gap`; WaitFn blocks until
// every row copy overlapping the asked range is released.
class SlowRows {
 public:
  SlowRows(const BlocksStateWriter& writer, std::chrono::microseconds gap) : writer_(writer), gap_(gap) {}
  ~SlowRows() {
    if (feeder_.joinable()) feeder_.join();
  }
  void Start() {
    feeder_ = std::thread([this] {
      for (size_t i = 0; i < writer_.n_row_copies(); ++i) {
        std::this_thread::sleep_for(gap_);
        {
          std::lock_guard<std::mutex> lock(mu_);
          released_ = i + 1;
        }
        cv_.notify_all();
      }
    });
  }
  bool AllReleased() const {
    std::lock_guard<std::mutex> lock(mu_);
    return released_ == writer_.n_row_copies();
  }
  static void WaitFn(void* self, size_t offset, size_t size) {
    auto* s = static_cast<SlowRows*>(self);
    size_t need = 0;  // 1 + the last row copy overlapping [offset, offset + size)
    for (size_t i = 0; i < s->writer_.n_row_copies(); ++i) {
      const auto [lo, hi] = s->writer_.RowBytes(i);
      if (lo < offset + size && offset < hi) need = i + 1;
    }
    std::unique_lock<std::mutex> lock(s->mu_);
    s->cv_.wait(lock, [&] { return s->released_ >= need; });
  }

 private:
  const BlocksStateWriter& writer_;
  const std::chrono::microseconds gap_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t released_ = 0;  // GUARDED_BY(mu_)
  std::thread feeder_;
};

// Counts the layers it let through before the rows were all released.
class CountingGate : public LayerGate {
 public:
  CountingGate(LayerGate& inner, const SlowRows& rows) : inner_(inner), rows_(rows) {}
  bool WaitLayer(int il) override {
    if (!rows_.AllReleased()) ++early_;
    ++calls_;
    return inner_.WaitLayer(il);
  }
  int early_ = 0, calls_ = 0;

 private:
  LayerGate& inner_;
  const SlowRows& rows_;
};

class RefusingGate : public LayerGate {
 public:
  explicit RefusingGate(LayerGate& inner) : inner_(inner) {}
  bool WaitLayer(int il) override { return il < 2 && inner_.WaitLayer(il); }

 private:
  LayerGate& inner_;
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
  rows.Start();
  auto import = LayerGatedImport::Start(*ctx_, 1, state_, *writer_, &SlowRows::WaitFn, &rows);
  ASSERT_TRUE(import.ok()) << import.status().ToString();
  ASSERT_TRUE(ctx_->TruncateSlot(1, kTokens - 1).ok());
  CountingGate gate(**import, rows);
  ASSERT_TRUE(ctx_->DecodeGated(LastToken(), &gate).ok());
  EXPECT_TRUE((*import)->CoveredAllLayers());
  ASSERT_TRUE((*import)->Finish().ok());
  EXPECT_EQ(gate.calls_, model_->info().n_layer);
  // The decode ran beside the import: it got through its first layers while
  // rows were still coming (each row copy 1.5 ms apart; the model's
  // layers' K rows come first, so at least layer 0 waits for rows to come).
  EXPECT_GT(gate.early_, 0);
  EXPECT_EQ(Logits(), ref_logits_);
  auto run = testing::GreedyDecode(*ctx_, 1, Logits(), 16);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(*run, ref_tokens_);
}

// Layers whose rows are in before the decode plans its pieces are not gated:
// here the import has ended, so the decode runs through as one piece, and
// every layer still counts as waited for.
TEST_F(LayerGatedImportTest, LayersWhoseRowsAreInDoNotStopTheDecode) {
  auto import = LayerGatedImport::Start(*ctx_, 1, state_, *writer_, nullptr, nullptr);
  ASSERT_TRUE(import.ok()) << import.status().ToString();
  ASSERT_TRUE((*import)->WaitEndedFor(std::chrono::seconds(30)));
  ASSERT_TRUE(ctx_->TruncateSlot(1, kTokens - 1).ok());
  struct ReadyCounting : LayerGate {
    explicit ReadyCounting(LayerGatedImport& in) : in(in) {}
    bool WaitLayer(int il) override {
      ++waits;
      return in.WaitLayer(il);
    }
    bool LayerReady(int il) override {
      const bool ready = in.LayerReady(il);
      ready_layers += ready;
      return ready;
    }
    LayerGatedImport& in;
    int waits = 0, ready_layers = 0;
  } gate(**import);
  ASSERT_TRUE(ctx_->DecodeGated(LastToken(), &gate).ok());
  EXPECT_EQ(gate.waits, 0);
  EXPECT_EQ(gate.ready_layers, model_->info().n_layer);
  EXPECT_TRUE((*import)->CoveredAllLayers());
  ASSERT_TRUE((*import)->Finish().ok());
  EXPECT_EQ(Logits(), ref_logits_);
}

TEST_F(LayerGatedImportTest, AnAbandonedDecodeLeavesAnImportThatAPlainDecodeThenUses) {
  auto import = LayerGatedImport::Start(*ctx_, 1, state_, *writer_, nullptr, nullptr);
  ASSERT_TRUE(import.ok()) << import.status().ToString();
  ASSERT_TRUE(ctx_->TruncateSlot(1, kTokens - 1).ok());
  RefusingGate gate(**import);
  Status s = ctx_->DecodeGated(LastToken(), &gate);
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  ASSERT_TRUE((*import)->Finish().ok());
  // The abandoned decode's position holds garbage rows: cut it, decode again.
  ASSERT_TRUE(ctx_->TruncateSlot(1, kTokens - 1).ok());
  ASSERT_TRUE(ctx_->Decode(LastToken()).ok());
  EXPECT_EQ(Logits(), ref_logits_);
}

TEST_F(LayerGatedImportTest, ARejectedStateFailsStartAndLeavesTheSlotEmpty) {
  std::vector<uint8_t> bad = state_;
  bad[0] ^= 0xff;  // the magic
  auto import = LayerGatedImport::Start(*ctx_, 1, bad, *writer_, nullptr, nullptr);
  EXPECT_EQ(import.status().code(), StatusCode::kCorruption) << import.status().ToString();
  EXPECT_EQ(ctx_->SlotLength(1), 0);
}

}  // namespace
}  // namespace agentkv::engine
