// Hybrid slots on synthetic bytes: states whose rows are f16 (the slots'
// type) go to q4_0 blocks (at rest) and back. The expected bytes are
// computed here row by row with ggml's own conversions, independently of
// seq_state.cc's layout walk (cells out of order, several streams, MLA,
// sliding windows, tail exports).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>

#include "engine/kv_row_convert.h"
#include "engine/seq_state.h"
#include "engine/seq_state_test_support.h"
#include "ggml.h"

namespace agentkv::engine {
namespace {

constexpr int32_t kF16 = GGML_TYPE_F16;
constexpr int32_t kQ4 = GGML_TYPE_Q4_0;

// The f32 values of row (section, layer, k/v, position): smooth but distinct
// per row, with one outlier per 32 values (as real K rows have).
std::vector<float> RowValues(uint32_t section, uint32_t layer, bool k, int32_t pos, uint32_t width) {
  std::mt19937 rng(section * 7919 + layer * 131 + (k ? 1 : 2) * 17 + static_cast<uint32_t>(pos) * 100003);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(width);
  for (uint32_t i = 0; i < width; ++i) v[i] = d(rng) * (i % 32 == 5 ? 6.0f : 1.0f);
  return v;
}

std::vector<uint8_t> F16Row(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 2);
  ggml_fp32_to_fp16_row(v.data(), reinterpret_cast<ggml_fp16_t*>(out.data()), static_cast<int64_t>(v.size()));
  return out;
}

std::vector<float> F32OfF16(const std::vector<uint8_t>& row) {
  std::vector<float> v(row.size() / 2);
  ggml_fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t*>(row.data()), v.data(), static_cast<int64_t>(v.size()));
  return v;
}

// Reference conversions, one row at a time through ggml's public API.
std::vector<uint8_t> Q4Row(const std::vector<float>& v) {
  std::vector<uint8_t> out(ggml_row_size(GGML_TYPE_Q4_0, static_cast<int64_t>(v.size())));
  ggml_quantize_chunk(GGML_TYPE_Q4_0, v.data(), out.data(), 0, 1, static_cast<int64_t>(v.size()), nullptr);
  return out;
}

std::vector<uint8_t> F16OfQ4(const std::vector<uint8_t>& q, uint32_t width) {
  std::vector<float> v(width);
  ggml_get_type_traits(GGML_TYPE_Q4_0)->to_float(q.data(), v.data(), width);
  return F16Row(v);
}

// The f16 row the slot holds for (section, layer, k, pos).
std::vector<uint8_t> SlotRow(uint32_t section, uint32_t layer, bool k, int32_t pos, uint32_t width) {
  return F16Row(RowValues(section, layer, k, pos, width));
}

struct Section {
  std::vector<int32_t> pos;  // cell order
  uint32_t n_layer = 1;
  uint32_t k_width = 64, v_width = 64;
  bool has_v = true;
};

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof(v));
}

// A state as llama_kv_cache::state_write writes it, f16 rows, the sequence in stream 0 of n_stream.
std::vector<uint8_t> F16State(const std::vector<Section>& sections, uint32_t n_stream) {
  std::vector<uint8_t> out;
  Put(&out, kLlamaSeqStateMagic);
  Put(&out, int32_t{0});
  for (uint32_t si = 0; si < sections.size(); ++si) {
    const Section& s = sections[si];
    Put(&out, n_stream);
    Put(&out, static_cast<uint32_t>(s.pos.size()));
    for (int32_t p : s.pos) {
      Put(&out, p);
      Put(&out, uint32_t{1});
      Put(&out, int32_t{0});
    }
    Put(&out, uint32_t{0});
    Put(&out, s.n_layer);
    for (int kv = 0; kv < (s.has_v ? 2 : 1); ++kv) {
      for (uint32_t l = 0; l < s.n_layer; ++l) {
        const uint32_t width = kv == 0 ? s.k_width : s.v_width;
        Put(&out, kF16);
        Put(&out, uint64_t{width} * 2);
        for (int32_t p : s.pos) {
          auto row = SlotRow(si, l, kv == 0, p, width);
          out.insert(out.end(), row.begin(), row.end());
        }
      }
    }
    for (uint32_t st = 1; st < n_stream; ++st) Put(&out, uint32_t{0});
  }
  return out;
}

using testing::Ptrs;
using testing::Shuffled;
using testing::StateOfBlocks;

const KvTensor* Find(const KvBlock& b, const std::string& name) {
  for (const auto& t : b.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Every row of every block is the q4_0 quantization of the slot's f16 row.
void ExpectBlocksAreQ4OfSlotRows(const std::vector<KvBlock>& blocks, const std::vector<Section>& sections) {
  for (const KvBlock& b : blocks) {
    for (const KvTensor& t : b.tensors) {
      unsigned si = 0, l = 0;
      char kv = 0;
      ASSERT_EQ(std::sscanf(t.name.c_str(), "c%u.l%u.%c", &si, &l, &kv), 3) << t.name;
      const uint32_t width = kv == 'k' ? sections[si].k_width : sections[si].v_width;
      ASSERT_EQ(t.row_bytes, width / 32 * 18) << t.name;
      ASSERT_EQ(t.data.size(), uint64_t{t.n_rows} * t.row_bytes) << t.name;
      for (uint32_t r = 0; r < t.n_rows; ++r) {
        const int32_t p = static_cast<int32_t>(t.first_pos + r);
        const auto want = Q4Row(F32OfF16(SlotRow(si, l, kv == 'k', p, width)));
        ASSERT_EQ(0, std::memcmp(t.data.data() + uint64_t{r} * t.row_bytes, want.data(), want.size()))
            << t.name << " position " << p;
      }
    }
  }
}

// Parses an f16 state written by an import and checks every row is the
// dequantized q4_0 row of the blocks, in position order from `lo`.
void ExpectStateIsDequantizedBlocks(const std::vector<uint8_t>& state, const StateShape& slot,
                                    const std::vector<KvBlock>& blocks, const std::vector<Section>& sections) {
  auto parsed = ParseState(state, slot);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  for (size_t si = 0; si < parsed->size(); ++si) {
    const ParsedSection& ps = (*parsed)[si];
    for (int kv = 0; kv < (sections[si].has_v ? 2 : 1); ++kv) {
      for (uint32_t l = 0; l < sections[si].n_layer; ++l) {
        const uint32_t width = kv == 0 ? sections[si].k_width : sections[si].v_width;
        const std::string name = "c" + std::to_string(si) + ".l" + std::to_string(l) + (kv == 0 ? ".k" : ".v");
        const uint8_t* rows = kv == 0 ? ps.k_rows[l] : ps.v_rows[l];
        for (size_t c = 0; c < ps.pos.size(); ++c) {
          const int32_t p = ps.pos[c];
          const KvTensor* t = Find(blocks[p / kBlockTokens], name);
          ASSERT_NE(t, nullptr);
          std::vector<uint8_t> q(t->data.begin() + uint64_t(p - t->first_pos) * t->row_bytes,
                                 t->data.begin() + uint64_t(p - t->first_pos + 1) * t->row_bytes);
          const auto want = F16OfQ4(q, width);
          ASSERT_EQ(0, std::memcmp(rows + c * width * 2, want.data(), want.size())) << name << " position " << p;
        }
      }
    }
  }
}

TEST(SeqStateHybridTest, F16SlotRowsBecomeQ4BlocksAndComeBackDequantized) {
  const uint32_t n = 2 * kBlockTokens + 40;
  const std::vector<Section> sections = {{Shuffled(0, n, 11), 2, 64, 128, true}};
  const std::vector<uint8_t> state = F16State(sections, 3);
  auto slot = InferStateShape(state);
  ASSERT_TRUE(slot.ok()) << slot.status().ToString();
  auto rest = AtRestShape(*slot, kQ4, kQ4);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(rest->sections[0].k_row_bytes, (std::vector<uint64_t>{36, 36}));
  EXPECT_EQ(rest->sections[0].v_row_bytes, (std::vector<uint64_t>{72, 72}));
  EXPECT_EQ(rest->sections[0].k_type, (std::vector<int32_t>{kQ4, kQ4}));
  EXPECT_EQ(rest->RowBytesPerToken(), 2u * (36 + 72));
  const KvLayout layout{*slot, *rest};

  // Export: blocks hold q4_0 of each slot row; sizes are at-rest sizes.
  for (int threads : {1, 3}) {
    auto blocks = StateToBlocks(state, layout, n, 0, threads);
    ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
    ASSERT_EQ(blocks->size(), 3u);
    EXPECT_EQ((*blocks)[2].n_tokens, 40u);
    EXPECT_EQ((*blocks)[0].payload_bytes(), uint64_t{kBlockTokens} * rest->RowBytesPerToken());
    ExpectBlocksAreQ4OfSlotRows(*blocks, sections);
  }
  auto blocks = StateToBlocks(state, layout, n, 0, 2);
  ASSERT_TRUE(blocks.ok());
  auto ptrs = Ptrs(*blocks);
  EXPECT_EQ(RestorablePrefix(ptrs, *rest, n), n);

  // Import: f16 rows, the dequantized q4_0 rows, in position order; the state
  // is as large as an f16 state of the same cells.
  EXPECT_EQ(StateBytesForBlocks(ptrs, layout, n, 3), state.size());
  auto restored = StateOfBlocks(ptrs, layout, n, 3);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  ASSERT_EQ(restored->size(), state.size());
  ExpectStateIsDequantizedBlocks(*restored, *slot, *blocks, sections);
  std::vector<uint8_t> par(restored->size());
  ASSERT_TRUE(WriteBlocksState(ptrs, layout, n, 3, par, 4).ok());  // threads: same bytes
  EXPECT_EQ(par, *restored);
  // Landed block by block (sched/read_landing.h): the same converted bytes.
  std::vector<uint8_t> landed(restored->size());
  auto writer = BlocksStateWriter::StartWithoutBlocks(layout, n, 3, landed);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (size_t b : {2, 0, 1}) ASSERT_TRUE(writer->CopyBlock((*blocks)[b]).ok());
  EXPECT_EQ(landed, *restored);

  // A restored slot re-exports the very same blocks: q4_0 -> f16 -> q4_0 is
  // exact with ggml's reference quantizer (the largest value maps to -8 x d).
  auto again = StateToBlocks(*restored, layout, n, 0, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *blocks);

  // A prefix (DIVERGE) and a tail export convert the same rows.
  auto prefix = StateOfBlocks(ptrs, layout, 300, 1);
  ASSERT_TRUE(prefix.ok());
  auto pblocks = StateToBlocks(*prefix, layout, 300);
  ASSERT_TRUE(pblocks.ok());
  EXPECT_EQ((*pblocks)[0], (*blocks)[0]);
  auto tail = StateToBlocks(state, layout, n, 1, 2);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0], (*blocks)[1]);
  EXPECT_EQ((*tail)[1], (*blocks)[2]);

  // The same layout with equal shapes is today's byte-for-byte copy.
  auto plain = StateToBlocks(state, KvLayout::Same(*slot), n);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)[0].tensors[0].row_bytes, 128u);
}

TEST(SeqStateHybridTest, SlidingWindowAndMlaSectionsConvert) {
  const uint32_t n = 600, window = 128;
  // A hybrid sliding-window model (base + windowed section) ...
  std::vector<Section> swa = {{Shuffled(0, n, 3), 1, 64, 64, true}, {Shuffled(n - window, n, 4), 2, 32, 96, true}};
  auto state = F16State(swa, 2);
  auto slot = InferStateShape(state);
  ASSERT_TRUE(slot.ok()) << slot.status().ToString();
  slot->sections[1].swa_window = window;
  auto rest = AtRestShape(*slot, kQ4, kQ4);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->sections[1].swa_window, window);
  const KvLayout layout{*slot, *rest};
  auto blocks = StateToBlocks(state, layout, n, 0, 2);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ((*blocks)[0].tensors.size(), 2u);       // no window rows in block 0
  EXPECT_EQ((*blocks)[2].tensors.size(), 2u + 4u);  // base + window layers
  ExpectBlocksAreQ4OfSlotRows(*blocks, swa);
  auto ptrs = Ptrs(*blocks);
  EXPECT_EQ(RestorablePrefix(ptrs, *rest, n), n);
  EXPECT_EQ(RestorablePrefix(ptrs, *rest, n - 10), 0u);
  for (uint32_t m : {n, n - 1}) {  // EXTEND and EXACT restores
    auto restored = StateOfBlocks(ptrs, layout, m, 2);
    ASSERT_TRUE(restored.ok()) << m << ": " << restored.status().ToString();
    ExpectStateIsDequantizedBlocks(*restored, *slot, *blocks, swa);
  }
  auto restored = StateOfBlocks(ptrs, layout, n, 2);
  ASSERT_EQ(restored->size(), state.size());  // the extra window position included
  EXPECT_EQ(*StateToBlocks(*restored, layout, n, 0, 1), *blocks);

  // ... and MLA (K only: latent + rope dims).
  std::vector<Section> mla = {{Shuffled(0, 40, 5), 3, 576, 0, false}};
  auto mstate = F16State(mla, 1);
  auto mslot = InferStateShape(mstate);
  ASSERT_TRUE(mslot.ok()) << mslot.status().ToString();
  ASSERT_FALSE(mslot->sections[0].has_v);
  auto mrest = AtRestShape(*mslot, kQ4, kQ4);
  ASSERT_TRUE(mrest.ok());
  const KvLayout mlayout{*mslot, *mrest};
  auto mblocks = StateToBlocks(mstate, mlayout, 40);
  ASSERT_TRUE(mblocks.ok());
  EXPECT_EQ((*mblocks)[0].tensors.size(), 3u);
  ExpectBlocksAreQ4OfSlotRows(*mblocks, mla);
  auto mrestored = StateOfBlocks(Ptrs(*mblocks), mlayout, 40, 1);
  ASSERT_TRUE(mrestored.ok());
  ExpectStateIsDequantizedBlocks(*mrestored, *mslot, *mblocks, mla);
}

TEST(SeqStateHybridTest, BadLayoutsAreRefused) {
  // A row width that is not a whole number of q4_0 blocks cannot be stored as q4_0.
  std::vector<Section> odd = {{{0, 1, 2}, 1, 48, 64, true}};
  auto slot = InferStateShape(F16State(odd, 1));
  ASSERT_TRUE(slot.ok());
  EXPECT_EQ(AtRestShape(*slot, kQ4, kQ4).status().code(), StatusCode::kUnsupported);
  EXPECT_TRUE(AtRestShape(*slot, kF16, kF16).ok());  // f16 at rest: nothing to convert

  // Shapes that differ beyond element types are refused, not misread.
  std::vector<Section> sec = {{{0, 1, 2}, 1, 64, 64, true}};
  auto state = F16State(sec, 1);
  auto s = InferStateShape(state);
  ASSERT_TRUE(s.ok());
  auto rest = AtRestShape(*s, kQ4, kQ4);
  ASSERT_TRUE(rest.ok());
  StateShape wrong = *rest;
  wrong.sections[0].k_row_bytes[0] = 72;  // 128 values, not 64
  EXPECT_EQ(StateToBlocks(state, KvLayout{*s, wrong}, 3).status().code(), StatusCode::kInvalidArgument);
  auto blocks = StateToBlocks(state, KvLayout{*s, *rest}, 3);
  ASSERT_TRUE(blocks.ok());
  EXPECT_FALSE(StateOfBlocks(Ptrs(*blocks), KvLayout{*s, wrong}, 3, 1).ok());
  // Truncated f16 states are Corruption whatever the layout.
  for (size_t len = 0; len < state.size(); len += 7) {
    EXPECT_FALSE(StateToBlocks(std::span(state.data(), len), KvLayout{*s, *rest}, 3).ok()) << len;
  }
}

TEST(KvRowConvertTest, WidthsAndBytes) {
  EXPECT_EQ(KvRowWidth(kF16, 128), 64u);
  EXPECT_EQ(KvRowWidth(kQ4, 36), 64u);
  EXPECT_EQ(KvRowWidth(kQ4, 35), 0u);
  EXPECT_EQ(KvRowBytesFor(kQ4, 64), 36u);
  EXPECT_EQ(KvRowBytesFor(kQ4, 48), 0u);
  EXPECT_EQ(KvRowBytesFor(GGML_TYPE_Q8_0, 64), 68u);
  EXPECT_EQ(KvRowWidth(-1, 8), 0u);
  EXPECT_EQ(KvRowWidth(100000, 8), 0u);
  EXPECT_TRUE(KvRowTypeConvertible(kQ4));
  EXPECT_FALSE(KvRowTypeConvertible(GGML_TYPE_IQ2_XXS));  // needs an importance matrix
}

}  // namespace
}  // namespace agentkv::engine
