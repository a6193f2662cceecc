#pragma once
// KV cache element types agentkv supports in engine slots.

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

}  // namespace agentkv::engine
