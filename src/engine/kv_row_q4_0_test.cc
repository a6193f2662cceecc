// engine/kv_row_q4_0: the one-pass f16 <-> q4_0 conversion writes exactly the
// bytes of ggml's reference path (the oracle here is ggml itself: its f16
// conversion, quantize_row_q4_0_ref through ggml_quantize_chunk, and
// dequantize_row_q4_0), over every finite f16 value and every scale.

#include "engine/kv_row_q4_0.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ggml.h"

namespace agentkv::engine {
namespace {

bool Finite(uint16_t h) { return (h & 0x7C00) != 0x7C00; }

std::vector<uint8_t> ReferenceQuantize(const std::vector<uint16_t>& x) {
  std::vector<float> f(x.size());
  for (size_t i = 0; i < x.size(); ++i) f[i] = ggml_fp16_to_fp32(x[i]);
  std::vector<uint8_t> out(x.size() / kQ4_0BlockValues * kQ4_0BlockBytes);
  ggml_quantize_chunk(GGML_TYPE_Q4_0, f.data(), out.data(), 0, 1, static_cast<int64_t>(x.size()), nullptr);
  return out;
}

std::vector<uint16_t> ReferenceDequantize(const std::vector<uint8_t>& q, size_t n_values) {
  std::vector<float> f(n_values);
  ggml_get_type_traits(GGML_TYPE_Q4_0)->to_float(q.data(), f.data(), static_cast<int64_t>(n_values));
  std::vector<uint16_t> out(n_values);
  for (size_t i = 0; i < n_values; ++i) out[i] = ggml_fp32_to_fp16(f[i]);
  return out;
}

void ExpectQuantizesLikeReference(const std::vector<uint16_t>& x) {
  ASSERT_EQ(x.size() % kQ4_0BlockValues, 0u);
  std::vector<uint8_t> got(x.size() / kQ4_0BlockValues * kQ4_0BlockBytes);
  F16ToQ4_0(x.data(), got.data(), x.size());
  const std::vector<uint8_t> want = ReferenceQuantize(x);
  for (size_t b = 0; b < got.size() / kQ4_0BlockBytes; ++b) {
    ASSERT_TRUE(std::equal(want.begin() + b * kQ4_0BlockBytes, want.begin() + (b + 1) * kQ4_0BlockBytes,
                           got.begin() + b * kQ4_0BlockBytes))
        << "block " << b << " first value 0x" << std::hex << x[b * kQ4_0BlockValues];
  }
}

TEST(KvRowQ4_0Test, QuantizesEveryFiniteHalfLikeTheReference) {
  std::vector<uint16_t> all;
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    if (Finite(static_cast<uint16_t>(h))) all.push_back(static_cast<uint16_t>(h));
  }
  all.resize(all.size() / kQ4_0BlockValues * kQ4_0BlockValues);
  ExpectQuantizesLikeReference(all);  // neighbours: blocks of nearby magnitudes
  std::mt19937 rng(7);
  std::shuffle(all.begin(), all.end(), rng);
  ExpectQuantizesLikeReference(all);  // mixed magnitudes and signs in a block
}

TEST(KvRowQ4_0Test, QuantizesKvLikeBlocksAndEdgeCasesLikeTheReference) {
  std::mt19937 rng(11);
  std::vector<uint16_t> x;
  // KV-like values: normal at several scales, so the rounding of x * id + 8.5
  // lands on every nibble and on the .5 boundaries.
  for (float scale : {1e-6f, 1e-3f, 0.05f, 1.0f, 30.0f, 2000.0f}) {
    std::normal_distribution<float> dist(0.0f, scale);
    for (int i = 0; i < 32 * 512; ++i) x.push_back(ggml_fp32_to_fp16(dist(rng)));
  }
  auto block = [&](std::initializer_list<float> head, float fill) {
    for (size_t j = 0; j < kQ4_0BlockValues; ++j) {
      x.push_back(ggml_fp32_to_fp16(j < head.size() ? head.begin()[j] : fill));
    }
  };
  block({}, 0.0f);               // all zero: the reference's scale is -0
  block({}, -0.0f);              // all negative zero
  block({3.0f, -3.0f}, 1.0f);    // |max| tie: the first one's sign wins
  block({-3.0f, 3.0f}, 1.0f);
  block({1.0f, 2.0f, -2.0f}, -2.0f);
  block({}, 65504.0f);           // largest half
  block({-65504.0f}, 65504.0f);
  block({6e-8f}, 0.0f);          // smallest subnormal half
  ExpectQuantizesLikeReference(x);
}

TEST(KvRowQ4_0Test, DequantizesEveryScaleAndNibbleLikeTheReference) {
  // One block per finite f16 scale; its 16 bytes hold all 16 low and all 16 high nibbles.
  std::vector<uint8_t> q;
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    if (!Finite(static_cast<uint16_t>(h))) continue;
    q.push_back(static_cast<uint8_t>(h & 0xFF));
    q.push_back(static_cast<uint8_t>(h >> 8));
    for (int j = 0; j < 16; ++j) q.push_back(static_cast<uint8_t>(j | ((15 - ((j + h) % 16)) << 4)));
  }
  const size_t n_values = q.size() / kQ4_0BlockBytes * kQ4_0BlockValues;
  std::vector<uint16_t> got(n_values);
  Q4_0ToF16(q.data(), got.data(), n_values);
  const std::vector<uint16_t> want = ReferenceDequantize(q, n_values);
  for (size_t i = 0; i < n_values; ++i) {
    ASSERT_EQ(got[i], want[i]) << "value " << i << " of block " << i / kQ4_0BlockValues;
  }
}

}  // namespace
}  // namespace agentkv::engine
