#pragma once
// Conversion of KV rows between ggml element types (f16, q8_0, q4_0, ...),
// the boundary of hybrid slots: an engine slot may hold f16 rows while the
// blocks at rest (RAM pool, disk, remote) hold q4_0 (engine/seq_state.cc,
// docs/engine.md "KV type in slots").
//
// Why a file of its own: seq_state.cc stays free of llama.h (it is pure
// layout code, tested on synthetic bytes). The conversions are ggml's own
// (its type traits' to_float, ggml_quantize_chunk), which need no model or
// backend, so seq_state_test still runs on synthetic bytes and checks the
// result against ggml independently.

#include <cstdint>

namespace agentkv::engine {

// Values in one row of `row_bytes` bytes of ggml type `type`; 0 when the
// type is unknown or row_bytes is not a whole number of its blocks.
uint64_t KvRowWidth(int32_t type, uint64_t row_bytes);
// Bytes of a row of `width` values of ggml type `type`; 0 when the type is
// unknown or width is not a multiple of its block size (q4_0/q8_0: 32).
uint64_t KvRowBytesFor(int32_t type, uint64_t width);
// Whether rows of this type can be converted (to and from f32 in ggml).
bool KvRowTypeConvertible(int32_t type);

// Converts n_rows consecutive rows from type `from` (src, rows of
// from_row_bytes) to type `to` (dst, rows of KvRowBytesFor(to, width)):
// dequantized to f32, then quantized with ggml's reference quantizer (the
// same bytes on every machine). from == to copies the bytes.
// REQUIRES: both types convertible, the widths consistent, src and dst do
// not overlap. Thread-safe: callers convert disjoint rows on several threads.
void ConvertKvRows(int32_t from, uint64_t from_row_bytes, int32_t to, const uint8_t* src, uint8_t* dst,
                   uint64_t n_rows);

}  // namespace agentkv::engine
