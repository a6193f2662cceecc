#pragma once
// LayerGatedImport: a slot's KV imported layer by layer, by the thread that
// drives the Context, while the bytes of its state may still be arriving.
//
// A warm restore used to be: every byte of the agent read, then the state
// imported into the slot, then the first decode. Here the slot's cells are
// set at Start (llama_state_seq_import_begin: patches/llama.cpp/0004) and
// each layer's K and V rows are copied in once they have landed in the
// state (RowSource: a disk read landing in it, sched/read_landing.h) —
// typically from inside the first decode, by its gate, just before that
// layer is computed (Context::DecodeGated, engine/layer_gate.h). What is
// left after the read's last byte is the last layers' copy and compute.
//
// No thread of its own: every call into llama.cpp happens in the caller's
// call (Start, ImportIfLanded, ImportWhenLanded, ImportLanded), on the
// thread that owns the Context, from within a gated decode or between
// decodes. Until Complete() the slot's rows of the layers not yet in hold
// garbage: the caller may then call only DecodeGated (with a gate that
// imports each layer before it is computed), TruncateSlot, SlotLength and
// Logits on the slot; ClearSlot to give it up (then destroy the import).
// Destruction frees the plan and touches neither the slot nor the state.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/context.h"
#include "engine/seq_state.h"
#include "util/status.h"

struct llama_state_seq_import;

namespace agentkv::engine {

// Where a state's row bytes come from while they arrive. Thread-safe.
class RowSource {
 public:
  virtual ~RowSource() = default;
  // Without blocking: whether state bytes [offset, offset + size) hold
  // their final values.
  virtual bool Landed(size_t offset, size_t size) const = 0;
  // Blocks at most `timeout` (less once they never will land); returns
  // Landed(offset, size).
  virtual bool WaitLanded(size_t offset, size_t size, std::chrono::microseconds timeout) const = 0;
  // Whether no more bytes will land (what has not landed never will).
  virtual bool Final() const = 0;
};

class LayerGatedImport {
 public:
  // Whether a slot of this shape can be imported gated: one cache section
  // (not a sliding-window model's two). Start refuses the others.
  static bool Supports(const StateShape& slot_shape) { return slot_shape.sections.size() == 1; }

  // Clears `slot` (applying a pending device copy it takes part in first:
  // Context::ClearSlotForImport), reads `state`'s headers (they must be final; its rows
  // need not be) and gives the slot its cells. `rows` says which rows have
  // landed; null: all of them. Corruption (slot cleared) if llama.cpp
  // refuses the state; Unsupported for a state of more than one cache
  // (`writer`, which wrote or is writing `state`, says); Internal (slot
  // cleared) if applying the pending copy fails. `ctx`, `state` and
  // `rows` must outlive the import.
  static Result<std::unique_ptr<LayerGatedImport>> Start(Context& ctx, int slot, std::span<const uint8_t> state,
                                                          const BlocksStateWriter& writer, const RowSource* rows);
  ~LayerGatedImport();
  LayerGatedImport(const LayerGatedImport&) = delete;
  LayerGatedImport& operator=(const LayerGatedImport&) = delete;

  // Layer il's rows copied into the slot: true if they are (now or before;
  // always for a layer without rows), false if they have not all landed.
  // ImportIfLanded never blocks; ImportWhenLanded waits at most `timeout`
  // for them (RowSource::WaitLanded).
  bool ImportIfLanded(int il);
  bool ImportWhenLanded(int il, std::chrono::microseconds timeout);
  // ImportIfLanded for every layer; returns Complete().
  bool ImportLanded();
  // Waits at most `timeout` for the first layer not in to land (no copy);
  // returns whether it has.
  bool WaitNextLayer(std::chrono::microseconds timeout) const;
  bool LayerIn(int il) const;  // copied in (true for a layer without rows)
  // Whether the rows not landed yet never will (RowSource::Final; false
  // without a RowSource: every row is in).
  bool RowsFinal() const { return rows_ != nullptr && rows_->Final(); }
  // Every layer with rows is in. Right after a gated decode (nothing else
  // imports during it), also: every layer was in before it was computed.
  bool Complete() const { return n_in_ == n_with_rows_; }
  int n_layers() const { return static_cast<int>(layers_.size()); }

 private:
  struct Range {
    size_t offset, size;
  };
  struct Layer {
    std::vector<Range> ranges;  // of the state, for its K and V copies
    bool in = false;
  };
  LayerGatedImport(llama_state_seq_import* plan, const RowSource* rows);
  bool Landed(const Layer& l) const;
  void Copy(int il);

  llama_state_seq_import* const plan_;
  const RowSource* const rows_;
  std::vector<Layer> layers_;  // by model layer
  int n_with_rows_ = 0, n_in_ = 0;
};

}  // namespace agentkv::engine
