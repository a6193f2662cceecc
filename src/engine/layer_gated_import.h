#pragma once
// LayerGatedImport: a slot's KV imported while the first decode in it runs.
//
// A warm restore used to be: every byte of the agent read, then the state
// imported into the slot, then the first decode. Here llama.cpp's import
// runs on a thread of its own and the decode beside it, gated layer by
// layer (engine/layer_gate.h): the decode computes layer il as soon as
// layer il's rows are in the cache. llama.cpp imports the rows in state
// order (every layer's K rows, then every layer's V rows); with a `wait`
// that blocks until a byte range has been written (a disk read landing in
// the state, sched/read_landing.h), the import and the decode follow the
// read, and what is left after its last byte is the last layers' copy and
// compute instead of the whole import and the whole decode.
//
// Use, on the thread that owns the Context:
//   auto import = LayerGatedImport::Start(ctx, slot, state, writer, wait, user);
//   ... ctx.TruncateSlot(slot, n) if needed; ctx.DecodeGated(items, import->get());
//   Status s = (*import)->Finish();   // before any other call into ctx
// Between Start and Finish the caller may call only DecodeGated, Decode
// (REQUIRES every layer waited for: CoveredAllLayers), TruncateSlot,
// SlotLength and Logits on ctx: llama.cpp copies rows into the cache on the
// import thread meanwhile (rows only: it set every cell before Start returned).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "engine/context.h"
#include "engine/layer_gate.h"
#include "engine/seq_state.h"
#include "util/mutex.h"
#include "util/status.h"

namespace agentkv::engine {

class LayerGatedImport final : public LayerGate {
 public:
  // Called before llama.cpp uses state bytes [offset, offset + size); may
  // block until they hold their final values (llama_state_wait_fn).
  using WaitFn = void (*)(void* user, size_t offset, size_t size);

  // Clears `slot` and starts importing `state` into it. `writer` wrote (or
  // is writing) `state` and names its rows; one cache section only
  // (Unsupported otherwise: a sliding-window model's second cache).
  // `wait` may be null (the state is complete). Returns once llama.cpp has
  // set the slot's cells, or its error (Corruption, slot cleared) if it
  // rejected the state first. `ctx`, `state`, `writer` and `user` must
  // outlive the import (Finish or destruction).
  // Whether a slot of this shape can be imported gated: one cache section
  // (not a sliding-window model's two). Start refuses the others.
  static bool Supports(const StateShape& slot_shape) { return slot_shape.sections.size() == 1; }

  static Result<std::unique_ptr<LayerGatedImport>> Start(Context& ctx, int slot, std::span<const uint8_t> state,
                                                          const BlocksStateWriter& writer, WaitFn wait, void* user);
  ~LayerGatedImport() override;  // Finish()es, ignoring its status
  LayerGatedImport(const LayerGatedImport&) = delete;
  LayerGatedImport& operator=(const LayerGatedImport&) = delete;

  // LayerGate: returns once every row of layer il is in the cache (at once
  // for a layer without rows), false if the import ended without them.
  bool WaitLayer(int il) override;
  // LayerGate: LayerIn(il), and if so marks layer il waited for.
  bool LayerReady(int il) override;
  // Without waiting: whether layer il's rows are all in the cache (true for
  // a layer without rows), and whether the import call returned (Finish
  // then does not block). Marks nothing waited for.
  bool LayerIn(int il) const;
  bool Ended() const;
  // Waits until the import call returned, at most `timeout`; returns Ended().
  bool WaitEndedFor(std::chrono::microseconds timeout) const;
  // Marks layer il waited for (a gate that polls LayerIn instead of WaitLayer).
  void NoteWaited(int il);
  // Whether every layer with rows was waited for since Start: a gated
  // decode whose graph named each layer (else its rows may have been read
  // before they were imported: the caller must not use that decode).
  bool CoveredAllLayers() const;
  // Joins the import thread: OK once every row is in the cache; else
  // llama.cpp's refusal (Corruption), the slot cleared. Once only.
  Status Finish();

 private:
  LayerGatedImport(Context& ctx, int slot, std::span<const uint8_t> state, const BlocksStateWriter& writer,
                   WaitFn wait, void* user);
  static void OnWait(void* self, size_t offset, size_t size);
  void Run();

  Context& ctx_;
  const int slot_;
  const std::span<const uint8_t> state_;
  const BlocksStateWriter& writer_;
  const WaitFn wait_;
  void* const user_;
  // Per layer: 1 + the index of its last row copy (0: no rows).
  std::vector<size_t> layer_rows_end_;
  std::vector<bool> waited_;  // per layer; the decoding thread's

  mutable Mutex mu_;
  mutable CondVar cv_;
  size_t rows_in_ GUARDED_BY(mu_) = 0;  // row copies [0, rows_in_) are in the cache
  bool cells_set_ GUARDED_BY(mu_) = false;  // llama.cpp began copying rows
  bool ended_ GUARDED_BY(mu_) = false;  // the import call returned
  bool accepted_ GUARDED_BY(mu_) = false;  // ... and read the whole state
  bool finished_ = false;     // Finish() ran
  std::thread thread_;
};

}  // namespace agentkv::engine
