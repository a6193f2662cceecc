#pragma once
// KV cache element types agentkv supports in engine slots.

#include <optional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace agentkv::engine {

enum class KvType { kQ4_0, kQ8_0, kF16 };

const char* KvTypeName(KvType t);                    // "q4_0", "q8_0", "f16"
Result<KvType> ParseKvType(std::string_view name);   // InvalidArgument for others
int KvTypeToGgml(KvType t);                          // ggml_type value
// Bytes of one row of n_elements values in this type (ggml_row_size).
size_t KvRowBytes(KvType t, size_t n_elements);

// --slot-kv: "auto" (nullopt) or a KvType name; InvalidArgument for others.
Result<std::optional<KvType>> ParseSlotKvType(std::string_view name);
// The engine slots' KV type for a --slot-kv choice. auto: the at-rest type,
// on a GPU (its quantized kernels are within 4% of f16, and VRAM is capacity)
// and on the CPU (patch 0005 sends quantized K/V down the tiled flash
// attention: prefill at parity with f16 slots, batched decode faster, restores
// copy blocks without conversion; bench/RESULTS.md, stop 23).
KvType ResolveSlotKvType(std::optional<KvType> choice, KvType at_rest);
// Whether slot rows can be rounded through the at-rest type as they are
// written (llama.cpp's type_kv_round, patch 0006) so that a restored slot is
// bit-identical to the resident one: f16 slots over q4_0 blocks, K and V
// alike (q4_0 -> f16 -> q4_0 is exact; q8_0 through f16 is not).
bool SlotRowsCanRoundToRest(KvType slot_k, KvType slot_v, KvType rest_k, KvType rest_v);

}  // namespace agentkv::engine
