// Pins llama.cpp's per-sequence state layout with synthetic bytes: cells out
// of position order, several streams, MLA (no V) and sliding-window sections.
#include "engine/seq_state.h"
#include "engine/row_copy_pipeline.h"
#include "engine/seq_state_test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

namespace agentkv::engine {
namespace {

struct FakeLayer {
  int32_t k_type, v_type;
  uint64_t k_row, v_row;
};

// Writes one section the way llama_kv_cache::state_write does.
void WriteHeader(std::vector<uint8_t>* out) {
  const uint32_t magic = kLlamaSeqStateMagic;
  const int32_t seq = 3;
  out->insert(out->end(), reinterpret_cast<const uint8_t*>(&magic), reinterpret_cast<const uint8_t*>(&magic) + 4);
  out->insert(out->end(), reinterpret_cast<const uint8_t*>(&seq), reinterpret_cast<const uint8_t*>(&seq) + 4);
}

void WriteSection(std::vector<uint8_t>* out, uint32_t n_stream, uint32_t stream, const std::vector<int32_t>& pos,
                  const std::vector<FakeLayer>& layers, bool has_v) {
  auto put = [&](auto v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out->insert(out->end(), p, p + sizeof(v));
  };
  // Row byte value encodes (layer, kv, position) so misplacements show.
  auto row = [&](uint32_t l, bool k, int32_t p, uint64_t n) {
    for (uint64_t b = 0; b < n; ++b) out->push_back(static_cast<uint8_t>(l * 31 + (k ? 7 : 13) + p * 3 + b));
  };
  put(n_stream);
  for (uint32_t s = 0; s < n_stream; ++s) {
    if (s != stream) {
      put(uint32_t{0});
      continue;
    }
    put(static_cast<uint32_t>(pos.size()));
    for (int32_t p : pos) {
      put(p);
      put(uint32_t{1});
      put(int32_t{5});
    }
    put(uint32_t{0});
    put(static_cast<uint32_t>(layers.size()));
    for (uint32_t l = 0; l < layers.size(); ++l) {
      put(layers[l].k_type);
      put(layers[l].k_row);
      for (int32_t p : pos) row(l, true, p, layers[l].k_row);
    }
    if (!has_v) continue;
    for (uint32_t l = 0; l < layers.size(); ++l) {
      put(layers[l].v_type);
      put(layers[l].v_row);
      for (int32_t p : pos) row(l, false, p, layers[l].v_row);
    }
  }
}

using testing::Ptrs;
using testing::Shuffled;
using testing::StateOfBlocks;

// A synthetic state of positions [0, n) (cells shuffled by `seed`) in stream
// `stream` of n_stream, with its inferred shape and its blocks; nullopt if
// either step fails.
struct Synthetic {
  std::vector<uint8_t> state;
  StateShape shape;
  std::vector<KvBlock> blocks;
};
std::optional<Synthetic> MakeSynthetic(const std::vector<FakeLayer>& layers, uint32_t n, uint32_t n_stream,
                                       uint32_t stream, unsigned seed, bool has_v) {
  Synthetic out;
  WriteHeader(&out.state);
  WriteSection(&out.state, n_stream, stream, Shuffled(0, n, seed), layers, has_v);
  auto shape = InferStateShape(out.state);
  if (!shape.ok()) return std::nullopt;
  out.shape = std::move(shape).value();
  auto blocks = StateToBlocks(out.state, out.shape, n);
  if (!blocks.ok()) return std::nullopt;
  out.blocks = std::move(blocks).value();
  return out;
}

TEST(SeqStateTest, DenseRoundTripIsBitExact) {
  const std::vector<FakeLayer> layers = {{2, 2, 18 * 4, 18 * 4}, {2, 8, 18 * 4, 34 * 4}};
  const uint32_t n = 3 * kBlockTokens + 17;
  std::vector<uint8_t> state;
  WriteHeader(&state);
  WriteSection(&state, /*n_stream=*/3, /*stream=*/1, Shuffled(0, n, 1), layers, true);

  auto shape = InferStateShape(state);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  ASSERT_EQ(shape->sections.size(), 1u);
  EXPECT_TRUE(shape->sections[0].has_v);
  EXPECT_EQ(shape->sections[0].n_layer, 2u);
  EXPECT_EQ(shape->RowBytesPerToken(), 18u * 4 * 3 + 34u * 4);

  auto blocks = StateToBlocks(state, *shape, n);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  ASSERT_EQ(blocks->size(), 4u);
  EXPECT_EQ((*blocks)[3].n_tokens, 17u);
  // Row of position p in block b is at (p - first_pos): check one byte.
  const KvTensor& t = (*blocks)[2].tensors[1];  // c0.l1.k
  EXPECT_EQ(t.name, "c0.l1.k");
  EXPECT_EQ(t.data[5 * t.row_bytes], static_cast<uint8_t>(31 + 7 + (2 * kBlockTokens + 5) * 3));

  auto ptrs = Ptrs(*blocks);
  EXPECT_EQ(RestorablePrefix(ptrs, *shape, n), n);
  auto rebuilt = StateOfBlocks(ptrs, *shape, n, 3);
  ASSERT_TRUE(rebuilt.ok());
  auto again = StateToBlocks(*rebuilt, *shape, n);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *blocks);

  // A prefix restore (DIVERGE) of 300 positions.
  auto prefix = StateOfBlocks(ptrs, *shape, 300, 3);
  ASSERT_TRUE(prefix.ok());
  auto pblocks = StateToBlocks(*prefix, *shape, 300);
  ASSERT_TRUE(pblocks.ok());
  EXPECT_EQ((*pblocks)[0], (*blocks)[0]);
  EXPECT_EQ((*pblocks)[1].n_tokens, 44u);

  // Exporting only the tail (the prefix blocks are held already) gives the
  // same blocks as the full export, and still validates the whole state.
  auto tail = StateToBlocks(state, *shape, n, 2);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0], (*blocks)[2]);
  EXPECT_EQ((*tail)[1], (*blocks)[3]);
  EXPECT_TRUE(StateToBlocks(state, *shape, n, 9)->empty());
  EXPECT_FALSE(StateToBlocks(std::span(state.data(), state.size() - 1), *shape, n, 3).ok());
}

// The two-step writer: its row ranges ascend and, with the headers Start
// writes, give WriteBlocksState's bytes; a RowCopyPipeline's reader that
// waits for each range in turn (as llama.cpp's does) sees final bytes only.
TEST(RowCopyPipelineTest, EveryWaitedRangeHoldsItsFinalBytes) {
  std::vector<FakeLayer> layers;
  for (int l = 0; l < 8; ++l) layers.push_back({2, 2, 18 * 4, 18 * 4});
  const uint32_t n = 3 * kBlockTokens + 17;
  auto synthetic = MakeSynthetic(layers, n, /*n_stream=*/2, /*stream=*/0, 2, true);
  ASSERT_TRUE(synthetic);
  const StateShape* shape = &synthetic->shape;
  const auto ptrs = Ptrs(synthetic->blocks);
  auto expected = StateOfBlocks(ptrs, *shape, n, 2);
  ASSERT_TRUE(expected.ok());

  const KvLayout layout = KvLayout::Same(*shape);
  for (int threads : {1, 3, 16}) {
    SCOPED_TRACE(threads);
    std::vector<uint8_t> dst(expected->size(), 0xEE);
    auto writer = BlocksStateWriter::Start(ptrs, layout, n, 2, dst);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_EQ(writer->n_row_copies(), 2 * layers.size());
    size_t prev_end = 0;
    for (size_t i = 0; i < writer->n_row_copies(); ++i) {
      auto [b, e] = writer->RowBytes(i);
      ASSERT_LT(prev_end, b) << "row copy " << i << " starts inside the previous one or its header";
      ASSERT_EQ(e - b, uint64_t{n} * 18 * 4);
      prev_end = e;
    }
    {
      RowCopyPipeline rows(*writer, threads);
      // Read in steps that straddle headers and rows, as llama.cpp's reader does.
      for (size_t off = 0; off < dst.size(); off += 1001) {
        const size_t len = std::min<size_t>(1001, dst.size() - off);
        rows.WaitReady(off, len);
        ASSERT_EQ(0, std::memcmp(dst.data() + off, expected->data() + off, len)) << "bytes at " << off;
      }
    }
    EXPECT_EQ(dst, *expected);
  }
  // Start refuses what WriteBlocksState refuses.
  std::vector<uint8_t> small(expected->size() - 1);
  EXPECT_FALSE(BlocksStateWriter::Start(ptrs, layout, n, 2, small).ok());
}

// Landing (sched/read_landing.h): headers written before any block is at
// hand, then each block's rows as it comes, in any order, from any thread,
// give WriteBlocksState's bytes; for MLA (no V) too.
TEST(BlocksStateWriterTest, BlocksCopiedAsTheyComeGiveTheSameState) {
  for (bool has_v : {true, false}) {
    SCOPED_TRACE(has_v ? "dense" : "mla");
    const std::vector<FakeLayer> layers = {{2, has_v ? 2 : 0, 18 * 4, has_v ? 18u * 4 : 0u},
                                           {2, has_v ? 8 : 0, 18 * 4, has_v ? 34u * 4 : 0u}};
    const uint32_t n = 3 * kBlockTokens + 17;
    auto synthetic = MakeSynthetic(layers, n, /*n_stream=*/3, /*stream=*/1, 5, has_v);
    ASSERT_TRUE(synthetic);
    const StateShape* shape = &synthetic->shape;
    const std::vector<KvBlock>* blocks = &synthetic->blocks;
    auto expected = StateOfBlocks(Ptrs(*blocks), *shape, n, 3);
    ASSERT_TRUE(expected.ok());

    const KvLayout layout = KvLayout::Same(*shape);
    ASSERT_EQ(MaxStateBytes(*shape, n, 3), expected->size());
    std::vector<uint8_t> dst(expected->size(), 0xEE);
    auto writer = BlocksStateWriter::StartWithoutBlocks(layout, n, 3, dst);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    EXPECT_NE(dst, *expected);  // the rows are still to come
    std::vector<std::thread> threads;
    for (size_t b : {3, 0, 2, 1}) {
      threads.emplace_back([&, b] { EXPECT_TRUE(writer->CopyBlock((*blocks)[b]).ok()); });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(dst, *expected);
  }
}

TEST(BlocksStateWriterTest, WithoutBlocksRefusesWindowsBadSizesAndIncompleteBlocks) {
  const std::vector<FakeLayer> layers = {{1, 1, 64, 64}, {1, 1, 64, 64}};
  const uint32_t n = kBlockTokens + 10;
  std::vector<uint8_t> state;
  WriteHeader(&state);
  WriteSection(&state, 1, 0, Shuffled(0, n, 6), layers, true);
  auto shape = InferStateShape(state);
  ASSERT_TRUE(shape.ok());
  auto blocks = StateToBlocks(state, *shape, n);
  ASSERT_TRUE(blocks.ok());
  const KvLayout layout = KvLayout::Same(*shape);
  const uint64_t bytes = MaxStateBytes(*shape, n, 1);

  std::vector<uint8_t> wrong(bytes + 1);
  EXPECT_EQ(BlocksStateWriter::StartWithoutBlocks(layout, n, 1, wrong).status().code(), StatusCode::kInvalidArgument);
  std::vector<uint8_t> dst(bytes);
  EXPECT_EQ(BlocksStateWriter::StartWithoutBlocks(layout, 0, 1, dst).status().code(), StatusCode::kInvalidArgument);

  // A block that lacks a layer's rows, or holds fewer than its positions,
  // is refused and writes nothing.
  auto writer = BlocksStateWriter::StartWithoutBlocks(layout, n, 1, dst);
  ASSERT_TRUE(writer.ok());
  const std::vector<uint8_t> headers_only = dst;
  KvBlock missing = (*blocks)[0];
  missing.tensors.pop_back();
  EXPECT_EQ(writer->CopyBlock(missing).code(), StatusCode::kInvalidArgument);
  KvBlock short_rows = (*blocks)[1];
  short_rows.tensors[0].n_rows -= 1;
  short_rows.tensors[0].data.resize(short_rows.tensors[0].data.size() - 64);
  EXPECT_EQ(writer->CopyBlock(short_rows).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dst, headers_only);

  // A sliding-window section: which positions it holds depends on the blocks.
  StateShape windowed = *shape;
  windowed.sections[0].swa_window = 128;
  EXPECT_EQ(BlocksStateWriter::StartWithoutBlocks(KvLayout::Same(windowed), n, 1, dst).status().code(),
            StatusCode::kUnsupported);
}

TEST(SeqStateTest, MlaWithoutVIsInferred) {
  const std::vector<FakeLayer> layers = {{2, 0, 18 * 18, 0}, {2, 0, 18 * 18, 0}, {2, 0, 18 * 18, 0}};
  std::vector<uint8_t> state;
  WriteHeader(&state);
  WriteSection(&state, 1, 0, Shuffled(0, 40, 2), layers, /*has_v=*/false);
  auto shape = InferStateShape(state);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_FALSE(shape->sections[0].has_v);
  auto blocks = StateToBlocks(state, *shape, 40);
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ((*blocks)[0].tensors.size(), 3u);
  auto rebuilt = StateOfBlocks(Ptrs(*blocks), *shape, 40, 1);
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_EQ(rebuilt->size(), state.size());  // same cells, now in position order
  auto again = StateToBlocks(*rebuilt, *shape, 40);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *blocks);
}

TEST(SeqStateTest, SlidingWindowSectionKeepsOnlyTheWindow) {
  const std::vector<FakeLayer> base = {{1, 1, 64, 64}};
  const std::vector<FakeLayer> swa = {{1, 1, 64, 64}, {1, 1, 64, 64}};
  const uint32_t n = 600, window = 128;
  std::vector<uint8_t> state;
  WriteHeader(&state);
  WriteSection(&state, 2, 0, Shuffled(0, n, 3), base, true);
  WriteSection(&state, 2, 0, Shuffled(n - window, n, 4), swa, true);
  auto shape = InferStateShape(state);
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  ASSERT_EQ(shape->sections.size(), 2u);
  shape->sections[1].swa_window = window;
  auto blocks = StateToBlocks(state, *shape, n);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  // Block 0 has no windowed-layer rows; block 2 holds positions 512..599 of them.
  EXPECT_EQ((*blocks)[0].tensors.size(), 2u);
  EXPECT_EQ((*blocks)[2].tensors.size(), 2u + 4u);
  auto ptrs = Ptrs(*blocks);
  EXPECT_EQ(RestorablePrefix(ptrs, *shape, n), n);
  // Truncating would need window rows that were never exported.
  EXPECT_EQ(RestorablePrefix(ptrs, *shape, n - 10), 0u);
  auto rebuilt = StateOfBlocks(ptrs, *shape, n, 2);
  ASSERT_TRUE(rebuilt.ok());
  auto again = StateToBlocks(*rebuilt, *shape, n);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *blocks);
}

TEST(SeqStateTest, EveryTruncationIsCorruptionNotACrash) {
  const std::vector<FakeLayer> layers = {{2, 2, 18, 18}};
  std::vector<uint8_t> state;
  WriteHeader(&state);
  WriteSection(&state, 1, 0, Shuffled(0, 5, 5), layers, true);
  auto shape = InferStateShape(state);
  ASSERT_TRUE(shape.ok());
  for (size_t len = 0; len < state.size(); ++len) {
    auto r = StateToBlocks(std::span(state.data(), len), *shape, 5);
    EXPECT_FALSE(r.ok()) << len;
  }
  // Wrong row size for the model.
  StateShape other = *shape;
  other.sections[0].k_row_bytes[0] = 36;
  EXPECT_EQ(ParseState(state, other).status().code(), StatusCode::kCorruption);
}

TEST(SeqStateTest, MissingBlockLimitsRestorablePrefix) {
  const std::vector<FakeLayer> layers = {{2, 2, 18, 18}};
  const uint32_t n = 2 * kBlockTokens + 3;
  std::vector<uint8_t> state;
  WriteHeader(&state);
  WriteSection(&state, 1, 0, Shuffled(0, n, 6), layers, true);
  auto shape = InferStateShape(state);
  auto blocks = StateToBlocks(state, *shape, n);
  ASSERT_TRUE(blocks.ok());
  auto ptrs = Ptrs(*blocks);
  ptrs.erase(ptrs.begin() + 1);  // block 1 lost
  EXPECT_EQ(RestorablePrefix(ptrs, *shape, n), kBlockTokens);
  (*blocks)[0].tensors[0].data.pop_back();  // malformed tensor
  EXPECT_EQ(RestorablePrefix(Ptrs(*blocks), *shape, n), 0u);
  EXPECT_FALSE(StateOfBlocks(Ptrs(*blocks), *shape, n, 1).ok());
}

}  // namespace
}  // namespace agentkv::engine

namespace agentkv::engine {
namespace {

// BlockTensorSizes counts what the blocks of an agent of n positions hold
// (its last block counted as full): compared with real blocks of 4 full
// blocks; a windowed section is counted only for the blocks its window reaches.
TEST(BlockTensorSizesTest, CountsTheTensorsOfAnAgentsBlocksBySize) {
  const std::vector<FakeLayer> layers = {{2, 2, 18 * 4, 18 * 4}, {2, 8, 18 * 4, 34 * 4}};
  const uint32_t n = 4 * kBlockTokens;
  auto synthetic = MakeSynthetic(layers, n, 1, 0, 9, true);
  ASSERT_TRUE(synthetic);
  std::map<size_t, size_t> held;
  for (const KvBlock& b : synthetic->blocks) {
    for (const KvTensor& t : b.tensors) ++held[t.data.size()];
  }
  const auto sizes = BlockTensorSizes(synthetic->shape, n);
  EXPECT_EQ((std::map<size_t, size_t>(sizes.begin(), sizes.end())), held);
  // A partial last block counts as a full one.
  EXPECT_EQ(BlockTensorSizes(synthetic->shape, n - 100), sizes);

  // A second section with a window of 300 positions: 3 blocks of it at most.
  StateShape windowed = synthetic->shape;
  SectionShape swa = windowed.sections[0];
  swa.swa_window = 300;
  swa.k_row_bytes = {1000, 1000};
  swa.v_row_bytes = {1000, 1000};
  windowed.sections.push_back(swa);
  auto with_window = BlockTensorSizes(windowed, 40 * kBlockTokens);
  std::map<size_t, size_t> got(with_window.begin(), with_window.end());
  EXPECT_EQ(got[1000 * kBlockTokens], 4u * 3);  // 2 layers x K,V x 3 blocks
  EXPECT_EQ(got[18 * 4 * kBlockTokens], 3u * 40);
}

}  // namespace
}  // namespace agentkv::engine
