#pragma once
// f16 <-> q4_0 KV rows in one pass, the hot pair of hybrid slots (f16 slots
// on CPU, q4_0 blocks at rest; engine/kv_row_convert.h).
//
// Contract: the bytes are exactly those of ggml's reference path (f16 ->
// f32 -> quantize_row_q4_0_ref, and dequantize_row_q4_0 -> f32 -> f16 with
// round to nearest even), for every finite input, so every machine still
// writes the same blocks; kv_row_q4_0_test checks it against ggml itself.
// NaN/Inf inputs give unspecified (but in-bounds) nibbles.
//
// x86-64 builds use AVX2 + F16C (the ggml build already requires them);
// elsewhere a scalar loop with the same arithmetic. Neither allocates.

#include <cstdint>

namespace agentkv::engine {

inline constexpr uint64_t kQ4_0BlockValues = 32;  // QK4_0
inline constexpr uint64_t kQ4_0BlockBytes = 18;   // f16 scale + 16 nibble bytes

// n_values f16 values (bits) -> n_values / 32 q4_0 blocks.
// REQUIRES: n_values % 32 == 0.
void F16ToQ4_0(const uint16_t* src, uint8_t* dst, uint64_t n_values);
// n_values / 32 q4_0 blocks -> n_values f16 values (bits).
// REQUIRES: n_values % 32 == 0.
void Q4_0ToF16(const uint8_t* src, uint16_t* dst, uint64_t n_values);

}  // namespace agentkv::engine
