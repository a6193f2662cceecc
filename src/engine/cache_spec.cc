#include "engine/cache_spec.h"

#include "ggml.h"
#include "util/hash.h"

namespace agentkv::engine {
namespace {

uint32_t Width(int32_t ggml_type_id, uint64_t row_bytes) {
  const auto t = static_cast<ggml_type>(ggml_type_id);
  return static_cast<uint32_t>(row_bytes / ggml_type_size(t) * ggml_blck_size(t));
}

}  // namespace

uint64_t ModelCacheSpec::LayerBytesPerToken(uint32_t i, KvType k, KvType v) const {
  const auto& l = layers[i];
  return KvRowBytes(k, l.k_width) + (l.v_width ? KvRowBytes(v, l.v_width) : 0);
}

uint64_t ModelCacheSpec::BytesPerToken(KvType k, KvType v, bool exclude_swa) const {
  uint64_t total = 0;
  for (uint32_t i = 0; i < layers.size(); ++i) {
    if (exclude_swa && layers[i].swa_window != 0) continue;
    total += LayerBytesPerToken(i, k, v);
  }
  return total;
}

std::string ModelCacheSpec::OutputFingerprint() const {
  if (!HybridSlots()) return fingerprint;
  return Sha256Hex(fingerprint + "\nslots k=" + KvTypeName(slot_type_k) + ",v=" + KvTypeName(slot_type_v) +
                   (slot_rows_rounded ? ",rounded" : "") + "\n");
}

std::string ModelCacheSpec::KvTypesString() const {
  return std::string("k=") + KvTypeName(type_k) + ",v=" + KvTypeName(type_v);
}

ModelCacheSpec MakeCacheSpec(const StateShape& shape, KvType k, KvType v, bool flash_attn, bool swa_full,
                             const std::string& identity_hash) {
  ModelCacheSpec spec;
  spec.shape = shape;
  spec.slot_shape = shape;
  spec.type_k = spec.slot_type_k = k;
  spec.type_v = spec.slot_type_v = v;
  spec.flash_attn = flash_attn;
  spec.swa_full = swa_full;
  std::string fp = "agentkv-cache-fingerprint\nmodel=" + identity_hash + "\nlayout=" +
                   std::to_string(kEngineLayoutVersion) + "\n" + spec.KvTypesString() +
                   "\nfa=" + std::to_string(flash_attn) + "\nswa_full=" + std::to_string(swa_full) + "\n";
  for (const auto& s : shape.sections) {
    fp += "section window=" + std::to_string(s.swa_window) + " has_v=" + std::to_string(s.has_v) + "\n";
    for (uint32_t l = 0; l < s.n_layer; ++l) {
      LayerCacheSpec ls;
      ls.k_width = Width(s.k_type[l], s.k_row_bytes[l]);
      ls.v_width = s.has_v ? Width(s.v_type[l], s.v_row_bytes[l]) : 0;
      ls.swa_window = s.swa_window;
      spec.layers.push_back(ls);
      fp += std::to_string(s.k_type[l]) + ":" + std::to_string(s.k_row_bytes[l]);
      if (s.has_v) fp += "/" + std::to_string(s.v_type[l]) + ":" + std::to_string(s.v_row_bytes[l]);
      fp += "\n";
    }
  }
  spec.fingerprint = Sha256Hex(fp);
  return spec;
}

Result<ModelCacheSpec> MakeHybridCacheSpec(const StateShape& slot_shape, KvType slot_k, KvType slot_v, KvType rest_k,
                                           KvType rest_v, bool flash_attn, bool swa_full,
                                           const std::string& identity_hash) {
  if (slot_k == rest_k && slot_v == rest_v) {
    return MakeCacheSpec(slot_shape, rest_k, rest_v, flash_attn, swa_full, identity_hash);
  }
  AGENTKV_ASSIGN_OR_RETURN(StateShape rest, AtRestShape(slot_shape, KvTypeToGgml(rest_k), KvTypeToGgml(rest_v)));
  // The fingerprint and widths come from the at-rest shape alone.
  ModelCacheSpec spec = MakeCacheSpec(rest, rest_k, rest_v, flash_attn, swa_full, identity_hash);
  spec.slot_shape = slot_shape;
  spec.slot_type_k = slot_k;
  spec.slot_type_v = slot_v;
  return spec;
}

}  // namespace agentkv::engine
