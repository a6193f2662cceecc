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
  // Exact layout of the blocks (at rest: RAM pool, disk, remote) in the
  // at-rest KV types type_k/type_v. RestorablePrefix and block sizes use it.
  StateShape shape;
  // Exact layout of llama.cpp's state for a slot, in the slots' KV types
  // slot_type_k/v (hybrid slots, e.g. f16 slots over q4_0 blocks); equal to
  // `shape` when the slots hold the at-rest types.
  StateShape slot_shape;
  KvType type_k = KvType::kQ4_0;  // at rest
  KvType type_v = KvType::kQ4_0;
  KvType slot_type_k = KvType::kQ4_0;  // in the engine's slots
  KvType slot_type_v = KvType::kQ4_0;
  bool flash_attn = true;
  bool swa_full = false;
  // Hybrid slots whose rows are rounded through the at-rest type as they are
  // written (Context::RoundsSlotRowsToRest): not part of `fingerprint` (the
  // bytes at rest are the same), part of OutputFingerprint (the logits differ).
  bool slot_rows_rounded = false;
  // sha256 over everything that makes the bytes AT REST meaningful: model
  // identity (metadata incl. tokenizer + all weights), at-rest KV types,
  // flash attention, swa_full, the at-rest layout shape,
  // kEngineLayoutVersion. Deliberately NOT the slot types: the blocks are the
  // same at-rest bytes whatever the slots hold, so a cache written by a
  // server with f16 slots (--slot-kv f16) restores on one with q4_0 slots and
  // vice versa, through every tier (docs/engine.md, "KV type in slots").
  std::string fingerprint;
  // What decides a request's output: `fingerprint` when the slots hold the
  // at-rest types; with hybrid slots a hash of it, the slot types (f16
  // slots compute other logits than q4_0 slots) and whether slot rows are
  // rounded. For the API's
  // system_fingerprint, never for naming caches.
  std::string OutputFingerprint() const;

  uint32_t n_layer() const { return static_cast<uint32_t>(layers.size()); }
  // K+V bytes per token over all layers for the given types (full-attention
  // layers only when exclude_swa; sliding-window layers cost at most a window).
  uint64_t BytesPerToken(KvType k, KvType v, bool exclude_swa = false) const;
  // Bytes per token per layer i.
  uint64_t LayerBytesPerToken(uint32_t i, KvType k, KvType v) const;
  std::string KvTypesString() const;  // at rest, e.g. "k=q4_0,v=q4_0"
  // Bytes per token at rest (blocks) and in a slot, over all layers.
  uint64_t RestBytesPerToken() const { return BytesPerToken(type_k, type_v); }
  uint64_t SlotBytesPerToken() const { return BytesPerToken(slot_type_k, slot_type_v); }
  // Whether slots and blocks hold different types (rows convert at export/import).
  bool HybridSlots() const { return slot_type_k != type_k || slot_type_v != type_v; }
  // The pair of layouts seq_state's conversions take (references into *this).
  KvLayout layout() const { return {slot_shape, shape}; }
  // Whether some layers keep only a sliding window of positions.
  bool HasSlidingWindow() const {
    for (const auto& l : layers) {
      if (l.swa_window != 0) return true;
    }
    return false;
  }
};

// Builds the spec from a learned state shape. `identity_hash` is ModelInfo's.
// Slots and blocks in the same types (k, v).
ModelCacheSpec MakeCacheSpec(const StateShape& shape, KvType k, KvType v, bool flash_attn, bool swa_full,
                             const std::string& identity_hash);
// Hybrid slots: `slot_shape` is learned from a context whose slots hold
// slot_k/slot_v; blocks hold rest_k/rest_v (AtRestShape). Unsupported when a
// row cannot be stored in the at-rest type. With equal types this is exactly
// the spec above (same fingerprint).
Result<ModelCacheSpec> MakeHybridCacheSpec(const StateShape& slot_shape, KvType slot_k, KvType slot_v, KvType rest_k,
                                           KvType rest_v, bool flash_attn, bool swa_full,
                                           const std::string& identity_hash);

}  // namespace agentkv::engine
