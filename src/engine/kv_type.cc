#include "engine/kv_type.h"

#include "ggml.h"

namespace agentkv::engine {

const char* KvTypeName(KvType t) {
  switch (t) {
    case KvType::kQ4_0: return "q4_0";
    case KvType::kQ8_0: return "q8_0";
    case KvType::kF16: return "f16";
  }
  return "?";
}

Result<KvType> ParseKvType(std::string_view name) {
  if (name == "q4_0") return KvType::kQ4_0;
  if (name == "q8_0") return KvType::kQ8_0;
  if (name == "f16") return KvType::kF16;
  return Status::InvalidArgument("kv type: '" + std::string(name) + "' (expected q4_0, q8_0 or f16)");
}

int KvTypeToGgml(KvType t) {
  switch (t) {
    case KvType::kQ4_0: return GGML_TYPE_Q4_0;
    case KvType::kQ8_0: return GGML_TYPE_Q8_0;
    case KvType::kF16: return GGML_TYPE_F16;
  }
  return GGML_TYPE_F16;
}

size_t KvRowBytes(KvType t, size_t n_elements) {
  return ggml_row_size(static_cast<ggml_type>(KvTypeToGgml(t)), n_elements);
}

Result<std::optional<KvType>> ParseSlotKvType(std::string_view name) {
  if (name == "auto") return std::optional<KvType>();
  auto t = ParseKvType(name);
  if (!t.ok()) {
    return Status::InvalidArgument("slot kv type: '" + std::string(name) + "' (expected auto, f16, q8_0 or q4_0)");
  }
  return std::optional<KvType>(*t);
}

KvType ResolveSlotKvType(std::optional<KvType> choice, KvType at_rest) { return choice.value_or(at_rest); }

bool SlotRowsCanRoundToRest(KvType slot_k, KvType slot_v, KvType rest_k, KvType rest_v) {
  return slot_k == KvType::kF16 && slot_v == KvType::kF16 && rest_k == KvType::kQ4_0 && rest_v == KvType::kQ4_0;
}

}  // namespace agentkv::engine
