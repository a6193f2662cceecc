#include "engine/layer_gated_import.h"

#include <algorithm>

#include "llama.h"

namespace agentkv::engine {

LayerGatedImport::LayerGatedImport(llama_state_seq_import* plan, const RowSource* rows) : plan_(plan), rows_(rows) {
  const size_t n = llama_state_seq_import_n_copies(plan);
  for (size_t i = 0; i < n; ++i) {
    const llama_state_seq_copy c = llama_state_seq_import_copy(plan, i);
    if (c.il < 0) continue;
    if (static_cast<size_t>(c.il) >= layers_.size()) layers_.resize(c.il + 1);
    layers_[c.il].ranges.push_back({c.src_offset, c.size});
  }
  for (Layer& l : layers_) {
    if (l.ranges.empty()) {
      l.in = true;  // nothing to copy
    } else {
      ++n_with_rows_;
    }
  }
}

Result<std::unique_ptr<LayerGatedImport>> LayerGatedImport::Start(Context& ctx, int slot,
                                                                   std::span<const uint8_t> state,
                                                                   const BlocksStateWriter& writer,
                                                                   const RowSource* rows) {
  if (writer.n_sections() != 1) return Status::Unsupported("gated import: a state of more than one cache");
  AGENTKV_RETURN_IF_ERROR(ctx.ClearSlotForImport(slot));  // (a pending slot copy must not land on these rows)
  llama_state_seq_import* plan = llama_state_seq_import_begin(ctx.raw(), state.data(), state.size(), slot, 0);
  if (plan == nullptr) {
    ctx.ClearSlot(slot);
    return Status::Corruption("gated import: llama.cpp rejected the state");
  }
  return std::unique_ptr<LayerGatedImport>(new LayerGatedImport(plan, rows));
}

LayerGatedImport::~LayerGatedImport() { llama_state_seq_import_free(plan_); }

bool LayerGatedImport::Landed(const Layer& l) const {
  if (rows_ == nullptr) return true;
  for (const Range& r : l.ranges) {
    if (!rows_->Landed(r.offset, r.size)) return false;
  }
  return true;
}

void LayerGatedImport::Copy(int il) {
  llama_state_seq_import_layer(plan_, il);
  layers_[il].in = true;
  ++n_in_;
}

bool LayerGatedImport::ImportIfLanded(int il) {
  if (il < 0 || static_cast<size_t>(il) >= layers_.size() || layers_[il].in) return true;
  if (!Landed(layers_[il])) return false;
  Copy(il);
  return true;
}

bool LayerGatedImport::ImportWhenLanded(int il, std::chrono::microseconds timeout) {
  if (ImportIfLanded(il)) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const Range& r : layers_[il].ranges) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
    if (!rows_->WaitLanded(r.offset, r.size, std::max(left, std::chrono::microseconds(0)))) return false;
  }
  return ImportIfLanded(il);
}

bool LayerGatedImport::ImportLanded() {
  for (int il = 0; il < n_layers(); ++il) (void)ImportIfLanded(il);
  return Complete();
}

bool LayerGatedImport::WaitNextLayer(std::chrono::microseconds timeout) const {
  if (rows_ == nullptr) return true;
  for (const Layer& l : layers_) {
    if (l.in) continue;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const Range& r : l.ranges) {
      const auto left =
          std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
      if (!rows_->WaitLanded(r.offset, r.size, std::max(left, std::chrono::microseconds(0)))) return false;
    }
    return true;
  }
  return true;  // every layer is in
}

bool LayerGatedImport::LayerIn(int il) const {
  return il < 0 || static_cast<size_t>(il) >= layers_.size() || layers_[il].in;
}

}  // namespace agentkv::engine
