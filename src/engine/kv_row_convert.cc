#include "engine/kv_row_convert.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#include "engine/kv_row_q4_0.h"
#include "ggml-cpu.h"
#include "ggml.h"

namespace agentkv::engine {
namespace {

// Rows converted per ggml call: bounds the f32 scratch (a 4096-wide row is
// 16 KiB of floats) and amortizes ggml_quantize_chunk's init check.
constexpr uint64_t kRowsPerChunk = 16;

bool KnownType(int32_t type) { return type >= 0 && type < GGML_TYPE_COUNT && ggml_type_size(ggml_type(type)) > 0; }

}  // namespace

uint64_t KvRowWidth(int32_t type, uint64_t row_bytes) {
  if (!KnownType(type)) return 0;
  const auto t = static_cast<ggml_type>(type);
  if (row_bytes % ggml_type_size(t) != 0) return 0;
  return row_bytes / ggml_type_size(t) * ggml_blck_size(t);
}

uint64_t KvRowBytesFor(int32_t type, uint64_t width) {
  if (!KnownType(type)) return 0;
  const auto t = static_cast<ggml_type>(type);
  if (width % ggml_blck_size(t) != 0) return 0;
  return ggml_row_size(t, static_cast<int64_t>(width));
}

bool KvRowTypeConvertible(int32_t type) {
  if (!KnownType(type)) return false;
  const auto t = static_cast<ggml_type>(type);
  return ggml_get_type_traits(t)->to_float != nullptr && !ggml_quantize_requires_imatrix(t) &&
         (t == GGML_TYPE_F16 || t == GGML_TYPE_F32 || t == GGML_TYPE_BF16 || t == GGML_TYPE_Q4_0 ||
          t == GGML_TYPE_Q4_1 || t == GGML_TYPE_Q5_0 || t == GGML_TYPE_Q5_1 || t == GGML_TYPE_Q8_0 ||
          t == GGML_TYPE_IQ4_NL);  // the KV cache types llama.cpp accepts
}

void ConvertKvRows(int32_t from, uint64_t from_row_bytes, int32_t to, const uint8_t* src, uint8_t* dst,
                   uint64_t n_rows) {
  if (from == to) {
    std::memcpy(dst, src, from_row_bytes * n_rows);
    return;
  }
  const uint64_t width = KvRowWidth(from, from_row_bytes);
  const uint64_t to_row_bytes = KvRowBytesFor(to, width);
  assert(width > 0 && to_row_bytes > 0 && KvRowTypeConvertible(from) && KvRowTypeConvertible(to));
  // Hybrid slots' pair (f16 slots, q4_0 at rest) in one SIMD pass, the same
  // bytes as the general path below (engine/kv_row_q4_0.h).
  if (from == GGML_TYPE_F16 && to == GGML_TYPE_Q4_0) {
    F16ToQ4_0(reinterpret_cast<const uint16_t*>(src), dst, n_rows * width);
    return;
  }
  if (from == GGML_TYPE_Q4_0 && to == GGML_TYPE_F16) {
    Q4_0ToF16(src, reinterpret_cast<uint16_t*>(dst), n_rows * width);
    return;
  }
  // The f16 side with ggml-cpu's SIMD conversions (F16C: IEEE round to
  // nearest even, the same bits as the reference); quantized types with
  // ggml's reference (de)quantizers, so every machine writes the same bytes.
  const ggml_to_float_t to_float = ggml_get_type_traits(static_cast<ggml_type>(from))->to_float;
  std::vector<float> scratch(width * std::min(n_rows, kRowsPerChunk));
  for (uint64_t r = 0; r < n_rows; r += kRowsPerChunk) {
    const uint64_t n = std::min(kRowsPerChunk, n_rows - r);
    const auto values = static_cast<int64_t>(n * width);
    const uint8_t* in = src + r * from_row_bytes;
    uint8_t* out = dst + r * to_row_bytes;
    if (from == GGML_TYPE_F16) {
      ggml_cpu_fp16_to_fp32(reinterpret_cast<const ggml_fp16_t*>(in), scratch.data(), values);
    } else {
      to_float(in, scratch.data(), values);
    }
    if (to == GGML_TYPE_F16) {
      ggml_cpu_fp32_to_fp16(scratch.data(), reinterpret_cast<ggml_fp16_t*>(out), values);
    } else {
      ggml_quantize_chunk(static_cast<ggml_type>(to), scratch.data(), out, 0, static_cast<int64_t>(n),
                          static_cast<int64_t>(width), nullptr);
    }
  }
}

}  // namespace agentkv::engine
