#pragma once
// Context: one llama context with S independent sequences ("slots"), each
// holding one agent's KV cache of up to slot_ctx positions.
//
// Thread safety: NOT thread-safe. Exactly one thread (the scheduler's
// inference thread) may call a Context; the Model it uses may be shared.
// Invariants: a slot's cells are positions [0, SlotLength(slot)) (or, for
// sliding-window layers, the window ending at SlotLength-1).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/cache_spec.h"
#include "engine/kv_type.h"
#include "engine/layer_gate.h"
#include "engine/model.h"
#include "engine/seq_state.h"
#include "engine/staging_buffer.h"
#include "store/kv_block.h"
#include "util/status.h"

struct llama_context;

namespace agentkv::engine {

struct ContextOptions {
  int n_slots = 4;
  int slot_ctx = 2048;  // positions per slot
  // KV types AT REST: the blocks' (RAM pool, disk, remote) and the cache
  // fingerprint's.
  KvType type_k = KvType::kQ4_0;
  KvType type_v = KvType::kQ4_0;
  // KV types of the engine's slots (llama.cpp's KV cache); unset: the
  // at-rest types (restores are a memcpy). When they differ ("hybrid
  // slots", e.g. --slot-kv f16), exports quantize slot rows to the
  // at-rest type and imports dequantize them (engine/seq_state.h);
  // ResolveSlotKvType picks them for --slot-kv auto.
  std::optional<KvType> slot_type_k;
  std::optional<KvType> slot_type_v;
  // Whether K/V rows are rounded through the at-rest type as they are
  // written into the slots (patch 0006), so that a slot restored from any
  // tier is bit-identical to the resident slot it replaces (docs/engine.md,
  // "Exactness"). Unset: on whenever SlotRowsCanRoundToRest (f16 slots over
  // q4_0 blocks, the hybrid). true elsewhere: Create() fails with
  // InvalidArgument. false: f16 slots hold unrounded rows (a restore is then
  // only tolerance-equal; for measuring what the rounding costs).
  std::optional<bool> round_slot_rows;
  bool flash_attn = true;  // required for quantized V
  int n_threads = 0;       // 0: all hardware threads
  int n_batch = 512;       // max tokens per Decode()
  // Create() runs one throw-away decode with logits (as llama.cpp's own
  // warm-up does), so that the first request after a start does not pay for
  // loading GPU kernels, capturing graphs or growing the output buffer.
  bool warmup = true;
  // The staging buffer (one slot's state; page-locked on a GPU, ~0.3-0.5 ms
  // per MB to allocate) is reserved when the context is created, once the
  // probe has sized it: before Create returns (kNow), on a thread of its own
  // beside the warm-up and whatever the caller starts next, the caller
  // calling WaitStagingReserved before it serves (kBeside), or in the
  // background, the first export or import waiting for what is left of it
  // (kBackground).
  StagingBuffer::When staging_reserve = StagingBuffer::When::kNow;
  // ImportSlotBlocks overlaps writing the state's rows (worker threads) with
  // llama.cpp copying them into the cache (RowCopyPipeline); unset: for
  // states of 4 MiB and more (below, starting the workers costs more than
  // the overlap saves). Measured faster on the H200 (32K: 62 -> 42-49 ms)
  // and on 2 CPU cores with f16 slots (8K: 6.4-6.6 -> 5.7-5.8 ms; bench/RESULTS.md).
  // The result is the same either way.
  std::optional<bool> overlap_import;
  // CopySlotPrefix copies between slots on the device where it can
  // (llama_memory_seq_cp); false: always through the staging buffer (the
  // route it falls back on). Unset: on for a model on a GPU (no round trip
  // through the host), off on CPU, where both routes are memcpy and the
  // device copy moves the whole stream (slot_ctx rows) and re-reserves the
  // graph: slower for a short prefix of a long slot, faster near a full one
  // (docs/engine.md, "Copying a slot"). The result is the same either way.
  std::optional<bool> device_slot_copy;
};

// One token to evaluate: append `token` at position `pos` of `slot`.
struct BatchItem {
  int slot = 0;
  int32_t token = 0;
  int32_t pos = 0;
  bool want_logits = false;
};

class Context {
 public:
  // Creates the llama context and probes its KV layout (decodes one token in
  // slot 0, exports it, clears it) to derive the ModelCacheSpec. The probe
  // and the warm-up run on a short-lived thread: the caller is left with no
  // compute workers (context.cc says why), so Decode() belongs on one thread.
  static Result<std::unique_ptr<Context>> Create(const Model& model, const ContextOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const ContextOptions& options() const { return options_; }
  // llama.cpp's compute threads (options().n_threads, or every hardware
  // thread when 0). Bulk KV copies on the calling (inference) thread use as
  // many: the compute threads are idle while a restore or export runs.
  int n_threads() const;
  const ModelCacheSpec& spec() const { return spec_; }
  // Whether rows written into the slots are rounded through the at-rest type
  // (ContextOptions::round_slot_rows resolved): a restore is then a
  // bit-identical copy of what the slot held.
  bool RoundsSlotRowsToRest() const { return spec_.slot_rows_rounded; }
  const Model& model() const { return model_; }
  int n_vocab() const { return model_.info().n_vocab; }

  // Binds the calling thread and its compute workers to one CPU each
  // (engine/compute_team.h; not when OMP_PROC_BIND is set, nor for a model
  // on a GPU, whose CPU team is nearly idle). Call it on the
  // thread that will call Decode(), before its first decode. Returns whether it bound.
  bool BindComputeThreadsToCpus() const;

  // Evaluates the items in one forward pass. REQUIRES items.size() <= n_batch,
  // every slot valid. Positions must extend each slot contiguously. Items may
  // come in any slot order: they are handed to llama.cpp in slot order, so
  // that slots with consecutive numbers share one pass over the weights
  // (context.cc says why); each slot's own items keep their order.
  // On failure the slots touched may hold a partial update: callers clear them.
  Status Decode(std::span<const BatchItem> items);
  // Decode() that asks gate->LayerReady(il), and else calls
  // gate->WaitLayer(il), before computing layer il (engine/layer_gate.h),
  // for a slot whose rows are still being imported
  // (engine/layer_gated_import.h). Cancelled when the gate abandoned the
  // decode: the slots touched then hold the items' positions with garbage
  // rows (callers truncate them). llama.cpp's layer callback, which stops
  // it, is set for this decode only: other decodes do not pay for it.
  Status DecodeGated(std::span<const BatchItem> items, LayerGate* gate);
  // Logits of items[i] of the last Decode(); REQUIRES items[i].want_logits,
  // and no export or import since that applied a pending device copy (see
  // CopySlotPrefix: it decodes a scratch token, which ends those logits).
  std::span<const float> Logits(int i) const;

  int32_t SlotLength(int slot) const;  // number of positions held (0 if empty)
  void ClearSlot(int slot);
  // Keeps positions [0, n). Fails (slot unchanged or cleared, see message) when
  // llama.cpp cannot drop a suffix, or when sliding-window layers have already
  // dropped cells the window ending at n needs (cuts of one token always work).
  Status TruncateSlot(int slot, int32_t n);

  // Makes `dst` hold positions [0, n) of `src` (src unchanged): another
  // agent's cache as the start of a new turn (sched/prefix_donor.h).
  // InvalidArgument for src == dst, OutOfRange for n > SlotLength(src);
  // FailedPrecondition (dst cleared) when src's sliding-window layers no
  // longer hold the window before n.
  //
  // On the device where it can (ContextOptions::device_slot_copy):
  // llama_memory_seq_cp copies dst's cell table at once but only queues the
  // copy of the rows (the whole of src's stream: O(slot_ctx) on the device,
  // nothing through the host), and llama.cpp runs that queue at the start of
  // its next llama_decode, with no public call to run it sooner. So until
  // the next Decode() the copy is "pending"; every call stays correct:
  //  - Decode/DecodeGated, TruncateSlot, ClearSlot, SlotLength and further
  //    copies need nothing (the queue runs in order before any compute);
  //  - an export of a pending dst (ExportSlotState/ExportSlotBlocks) and an
  //    import into a pending src or dst first apply the queue by decoding
  //    one scratch token into an empty slot (an import: its own, cleared
  //    target; full-attention models with no empty slot: the end of a slot
  //    that has room, removed again), which ends the last Decode's Logits().
  // So the device copy is taken only when that scratch token will have a
  // place: an empty slot besides dst, or (no sliding-window layers, where a
  // new token may overwrite a cell of the window) a slot with room. With
  // sliding-window layers only for n == SlotLength(src): an export keeps
  // only the window of its last position, so the staging route gives dst
  // fewer windowed cells than seq_cp would (and fails for n < SlotLength-1).
  // Elsewhere, and for recurrent/hybrid models, the rows go through the
  // staging buffer (a device -> host -> device round trip on a GPU;
  // O(SlotLength(src)) rows). If the device copy leaves dst with another
  // cell table than src's, dst is cleared and the staging route is taken.
  Status CopySlotPrefix(int src, int dst, int32_t n);
  // What CopySlotPrefix did so far: copies on the device, through the
  // staging buffer, and scratch tokens that applied pending device copies.
  struct SlotCopyCounts {
    uint64_t device = 0;
    uint64_t staged = 0;
    uint64_t applied = 0;
  };
  SlotCopyCounts slot_copy_counts() const { return copy_counts_; }

  // Raw llama.cpp state of one slot, and back into any (empty) slot.
  Result<std::vector<uint8_t>> ExportSlotState(int slot) const;
  Status ImportSlotState(int slot, std::span<const uint8_t> state);

  // The slot's KV as position-ordered blocks (engine/seq_state.h), from block
  // first_block on (earlier blocks are skipped: an unchanged prefix the caller
  // already holds), and back: imports positions [0, n_tokens) of `blocks`
  // into `slot` (cleared first).
  Result<std::vector<KvBlock>> ExportSlotBlocks(int slot, uint32_t first_block = 0) const;
  Status ImportSlotBlocks(int slot, const std::vector<const KvBlock*>& blocks, uint32_t n_tokens);

  // For importers that write a slot's state through llama.cpp themselves
  // (engine/layer_gated_import.h): clears `slot` and applies the pending
  // device copies it takes part in (CopySlotPrefix), so that none lands on
  // the rows about to be written. Internal (slot cleared) if that fails.
  Status ClearSlotForImport(int slot);

  llama_context* raw() const { return ctx_; }
  // Whether state transfers go through page-locked memory (GPU models).
  // Never waits for a reservation on its own thread (staging_reserve).
  bool staging_pinned() const { return staging_.pinning(); }
  // Returns once the staging buffer's memory is reserved (staging_reserve
  // kBeside or kBackground; at once for kNow). Any thread.
  void WaitStagingReserved() const { staging_.WaitReserved(); }
  // The staging buffer's memory now, page-locked and heap (StagingBuffer::
  // page_locked_bytes, heap_bytes). Never waits; any thread.
  uint64_t staging_page_locked_bytes() const { return staging_.page_locked_bytes(); }
  uint64_t staging_heap_bytes() const { return staging_.heap_bytes(); }

 private:
  // Allocates the staging buffer for a full slot at creation (page-locked
  // memory takes ~0.3 ms/MB to allocate: never inside a request), now or on
  // a thread of its own (ContextOptions::staging_reserve).
  void ReserveStaging();
  Context(const Model& model, const ContextOptions& options)
      : model_(model), options_(options), staging_(model.info().n_gpu_layers > 0) {}
  Status Probe();
  Status Warmup();  // see ContextOptions::warmup
  // llama.cpp's state of one slot, or of its positions >= pos_min only: its
  // exact size, and a copy into dst (REQUIRES dst.size() == SlotStateSize(slot, pos_min)).
  size_t SlotStateSize(int slot, int32_t pos_min = 0) const;
  Status CopySlotState(int slot, std::span<uint8_t> dst, int32_t pos_min = 0) const;
  // Clears `slot` and loads `state` into it; `wait` (may be null) is called
  // before llama.cpp uses each byte range (llama_state_seq_set_data_wait).
  // Corruption (slot cleared) if llama.cpp rejects the state.
  Status SetSlotState(int slot, std::span<const uint8_t> state, void (*wait)(void*, size_t, size_t), void* wait_user);

  // Device copies (CopySlotPrefix): whether one may be queued now, and
  // applying the queue (one scratch token in `scratch`, or -1: any slot that
  // can take it). Const: an export calls it; it changes no slot's content.
  bool CanCopyOnDevice(int src, int dst, int32_t n) const;
  Status ApplyPendingCopies(int scratch = -1) const;
  bool ExportNeedsApply(int slot) const { return copy_pending_ && (copy_role_[slot] & kCopyDst) != 0; }
  bool ImportNeedsApply(int slot) const { return copy_pending_ && copy_role_[slot] != 0; }

  // llama.cpp's layer callback (llama_layer_callback), set during
  // DecodeGated only: asks to stop before each layer that is not
  // LayerReady, and there calls WaitLayer.
  static bool OnLayer(int32_t il, bool ask, void* self);

  const Model& model_;
  ContextOptions options_;
  llama_context* ctx_ = nullptr;
  LayerGate* gate_ = nullptr;  // during DecodeGated only
  bool gate_refused_ = false;
  ModelCacheSpec spec_;
  mutable std::vector<int32_t> last_logit_rows_;  // item index -> batch row with logits
  std::vector<size_t> batch_order_;               // Decode: batch row -> item index (slot order)
  // Device copies queued in llama.cpp and not yet applied (CopySlotPrefix):
  // each slot's role in them (kCopySrc, kCopyDst bits). Cleared by any
  // llama_decode that got as far as llama.cpp's memory update.
  static constexpr uint8_t kCopySrc = 1, kCopyDst = 2;
  mutable bool copy_pending_ = false;
  mutable std::vector<uint8_t> copy_role_;
  mutable SlotCopyCounts copy_counts_;
  // Reused for every state export/import (engine/staging_buffer.h):
  // allocating and faulting in hundreds of MB per restore costs more than the copy.
  mutable StagingBuffer staging_;
};

}  // namespace agentkv::engine
