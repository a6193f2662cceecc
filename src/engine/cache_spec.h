#pragma once
// ModelCacheSpec: what one token of KV costs and means for a loaded model,
// derived from the model and an actual export (never from a model name).

#include <cstdint>
#include <string>
#include <vector>

#include "engine/kv_type.h"
#include "engine/seq_state.h"

namespace agentkv::engine {

struct LayerCacheSpec {
  uint32_t k_width = 0;     // values per position (n_embd_k_gqa; MLA: latent + rope dims)
  uint32_t v_width = 0;     // n_embd_v_gqa; 0 when V is not stored (MLA)
  uint32_t swa_window = 0;  // 0 = full attention
};

struct ModelCacheSpec {
  std::vector<LayerCacheSpec> layers;  // in export order: section by section
  StateShape shape;                    // exact layout in the slot's KV types
  KvType type_k = KvType::kQ4_0;
  KvType type_v = KvType::kQ4_0;
  bool flash_attn = true;
  bool swa_full = false;
  // sha256 over everything that makes KV bytes meaningful: model identity
  // (metadata incl. tokenizer + sampled weights), KV types, flash attention,
  // swa_full, the layout shape, kEngineLayoutVersion.
  std::string fingerprint;

  uint32_t n_layer() const { return static_cast<uint32_t>(layers.size()); }
  // K+V bytes per token over all layers for the given types (full-attention
  // layers only when exclude_swa; sliding-window layers cost at most a window).
  uint64_t BytesPerToken(KvType k, KvType v, bool exclude_swa = false) const;
  // Bytes per token per layer i.
  uint64_t LayerBytesPerToken(uint32_t i, KvType k, KvType v) const;
  std::string KvTypesString() const;  // e.g. "k=q4_0,v=q4_0"
  // Whether some layers keep only a sliding window of positions.
  bool HasSlidingWindow() const {
    for (const auto& l : layers) {
      if (l.swa_window != 0) return true;
    }
    return false;
  }
};

// Builds the spec from a learned state shape. `identity_hash` is ModelInfo's.
ModelCacheSpec MakeCacheSpec(const StateShape& shape, KvType k, KvType v, bool flash_attn, bool swa_full,
                             const std::string& identity_hash);

}  // namespace agentkv::engine
