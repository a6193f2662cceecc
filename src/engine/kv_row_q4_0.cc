#include "engine/kv_row_q4_0.h"

#include <cmath>
#include <cstring>

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define AGENTKV_Q4_0_AVX2 1
#else
#include "ggml.h"  // ggml_fp16_to_fp32 / ggml_fp32_to_fp16 (round to nearest even)
#endif

// The arithmetic below must stay the reference's, operation by operation:
// no fused multiply-add (this file is compiled with -ffp-contract=off).

namespace agentkv::engine {
namespace {

uint16_t LoadScale(const uint8_t* block) {
  uint16_t d;
  std::memcpy(&d, block, sizeof d);
  return d;
}

void StoreScale(uint8_t* block, uint16_t d) { std::memcpy(block, &d, sizeof d); }

#if AGENTKV_Q4_0_AVX2

float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
uint16_t FloatToHalf(float f) { return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }

// 8 i32 in [0, 15] of `a` and `b` -> 16 bytes, a's first.
__m128i PackBytes(__m256i a, __m256i b) {
  const __m128i a16 = _mm_packs_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  const __m128i b16 = _mm_packs_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  return _mm_packus_epi16(a16, b16);
}

void QuantizeBlock(const uint16_t* x, uint8_t* y) {
  __m256 v[4];
  for (int g = 0; g < 4; ++g) v[g] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 8 * g)));
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 a[4];
  for (int g = 0; g < 4; ++g) a[g] = _mm256_andnot_ps(sign, v[g]);
  __m256 m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  const float amax = _mm_cvtss_f32(m4);
  // The reference keeps the signed value of the FIRST element whose |x| is
  // the maximum, and 0 when every element is (+-)0.
  float max = 0.0f;
  if (amax > 0.0f) {
    const __m256 am = _mm256_set1_ps(amax);
    uint32_t hits = 0;
    for (int g = 0; g < 4; ++g) {
      hits |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(a[g], am, _CMP_EQ_OQ))) << (8 * g);
    }
    max = HalfToFloat(x[__builtin_ctz(hits)]);
  }
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreScale(y, FloatToHalf(d));
  const __m256 vid = _mm256_set1_ps(id);
  const __m256 half8 = _mm256_set1_ps(8.5f);
  const __m256i fifteen = _mm256_set1_epi32(15);
  __m256i q[4];
  for (int g = 0; g < 4; ++g) {
    q[g] = _mm256_min_epi32(fifteen, _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v[g], vid), half8)));
  }
  const __m128i lo = PackBytes(q[0], q[1]);  // values 0..15: low nibbles
  const __m128i hi = PackBytes(q[2], q[3]);  // values 16..31: high nibbles
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y + 2), _mm_or_si128(lo, _mm_slli_epi16(hi, 4)));
}

void DequantizeBlock(const uint8_t* y, uint16_t* x) {
  const __m256 d = _mm256_set1_ps(HalfToFloat(LoadScale(y)));
  const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + 2));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i nib[2] = {_mm_and_si128(qs, mask), _mm_and_si128(_mm_srli_epi16(qs, 4), mask)};
  const __m256i eight = _mm256_set1_epi32(8);
  for (int g = 0; g < 4; ++g) {
    const __m128i bytes = g % 2 == 0 ? nib[g / 2] : _mm_srli_si128(nib[g / 2], 8);
    const __m256i i = _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), eight);
    const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(i), d);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(x + 8 * g), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
  }
}

#else  // portable: the reference loops themselves

float HalfToFloat(uint16_t h) { return ggml_fp16_to_fp32(h); }
uint16_t FloatToHalf(float f) { return ggml_fp32_to_fp16(f); }

void QuantizeBlock(const uint16_t* x16, uint8_t* y) {
  float x[kQ4_0BlockValues];
  for (uint64_t j = 0; j < kQ4_0BlockValues; ++j) x[j] = HalfToFloat(x16[j]);
  float amax = 0.0f, max = 0.0f;
  for (float v : x) {
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreScale(y, FloatToHalf(d));
  for (uint64_t j = 0; j < kQ4_0BlockValues / 2; ++j) {
    const auto q0 = static_cast<int8_t>(x[j] * id + 8.5f);
    const auto q1 = static_cast<int8_t>(x[j + 16] * id + 8.5f);
    y[2 + j] = static_cast<uint8_t>((q0 < 15 ? q0 : 15) | ((q1 < 15 ? q1 : 15) << 4));
  }
}

void DequantizeBlock(const uint8_t* y, uint16_t* x) {
  const float d = HalfToFloat(LoadScale(y));
  for (uint64_t j = 0; j < kQ4_0BlockValues / 2; ++j) {
    x[j] = FloatToHalf(static_cast<float>((y[2 + j] & 0x0F) - 8) * d);
    x[j + 16] = FloatToHalf(static_cast<float>((y[2 + j] >> 4) - 8) * d);
  }
}

#endif

}  // namespace

void F16ToQ4_0(const uint16_t* src, uint8_t* dst, uint64_t n_values) {
  for (uint64_t b = 0; b < n_values / kQ4_0BlockValues; ++b) {
    QuantizeBlock(src + b * kQ4_0BlockValues, dst + b * kQ4_0BlockBytes);
  }
}

void Q4_0ToF16(const uint8_t* src, uint16_t* dst, uint64_t n_values) {
  for (uint64_t b = 0; b < n_values / kQ4_0BlockValues; ++b) {
    DequantizeBlock(src + b * kQ4_0BlockBytes, dst + b * kQ4_0BlockValues);
  }
}

}  // namespace agentkv::engine
