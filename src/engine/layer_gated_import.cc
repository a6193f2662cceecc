#include "engine/layer_gated_import.h"

#include <algorithm>

#include "llama.h"

namespace agentkv::engine {

LayerGatedImport::LayerGatedImport(Context& ctx, int slot, std::span<const uint8_t> state,
                                   const BlocksStateWriter& writer, WaitFn wait, void* user)
    : ctx_(ctx), slot_(slot), state_(state), writer_(writer), wait_(wait), user_(user) {
  for (size_t i = 0; i < writer.n_row_copies(); ++i) {
    const uint32_t layer = writer.RowLayer(i);
    if (layer >= layer_rows_end_.size()) layer_rows_end_.resize(layer + 1, 0);
    layer_rows_end_[layer] = i + 1;
  }
  waited_.assign(layer_rows_end_.size(), false);
}

Result<std::unique_ptr<LayerGatedImport>> LayerGatedImport::Start(Context& ctx, int slot,
                                                                   std::span<const uint8_t> state,
                                                                   const BlocksStateWriter& writer, WaitFn wait,
                                                                   void* user) {
  if (writer.n_sections() != 1) return Status::Unsupported("gated import: a state of more than one cache");
  std::unique_ptr<LayerGatedImport> import(new LayerGatedImport(ctx, slot, state, writer, wait, user));
  AGENTKV_RETURN_IF_ERROR(ctx.ClearSlotForImport(slot));  // (a pending slot copy must not land on these rows)
  import->thread_ = std::thread([p = import.get()] { p->Run(); });
  {
    MutexLock lock(&import->mu_);
    import->cv_.Wait(&lock, [&] {
      import->mu_.AssertHeld();  // the predicate runs with the lock held
      return import->cells_set_ || import->ended_;
    });
    if (import->cells_set_ || import->accepted_) return import;  // (accepted: a state without rows)
  }
  return import->Finish();  // refused before its first row: Corruption, slot cleared
}

LayerGatedImport::~LayerGatedImport() {
  if (!finished_) (void)Finish();
}

void LayerGatedImport::Run() {
  const size_t read =
      llama_state_seq_set_data_wait(ctx_.raw(), state_.data(), state_.size(), slot_, 0, &OnWait, this);
  {
    MutexLock lock(&mu_);
    ended_ = true;
    accepted_ = read != 0;
    if (accepted_) rows_in_ = writer_.n_row_copies();
  }
  cv_.NotifyAll();
}

void LayerGatedImport::OnWait(void* self, size_t offset, size_t size) {
  auto* g = static_cast<LayerGatedImport*>(self);
  // llama.cpp reads every header first, then copies the rows into the cache
  // in state order, asking for each row copy's exact range just before its
  // copy: so a call for row copy i means copies [0, i) are in the cache.
  const size_t lo = g->writer_.FirstRowCopyEndingAfter(offset);
  if (lo < g->writer_.n_row_copies() && g->writer_.RowBytes(lo) == std::make_pair(offset, offset + size)) {
    {
      MutexLock lock(&g->mu_);
      g->cells_set_ = true;
      g->rows_in_ = std::max(g->rows_in_, lo);
    }
    g->cv_.NotifyAll();
  }
  if (g->wait_ != nullptr) g->wait_(g->user_, offset, size);
}

bool LayerGatedImport::WaitLayer(int il) {
  if (il < 0 || static_cast<size_t>(il) >= layer_rows_end_.size() || layer_rows_end_[il] == 0) return true;
  waited_[il] = true;
  const size_t need = layer_rows_end_[il];
  MutexLock lock(&mu_);
  cv_.Wait(&lock, [&] {
    mu_.AssertHeld();  // the predicate runs with the lock held
    return rows_in_ >= need || ended_;
  });
  return rows_in_ >= need;
}

bool LayerGatedImport::LayerReady(int il) {
  if (!LayerIn(il)) return false;
  NoteWaited(il);
  return true;
}

bool LayerGatedImport::LayerIn(int il) const {
  if (il < 0 || static_cast<size_t>(il) >= layer_rows_end_.size()) return true;
  MutexLock lock(&mu_);
  return rows_in_ >= layer_rows_end_[il];
}

bool LayerGatedImport::Ended() const {
  MutexLock lock(&mu_);
  return ended_;
}

bool LayerGatedImport::WaitEndedFor(std::chrono::microseconds timeout) const {
  MutexLock lock(&mu_);
  return cv_.WaitFor(&lock, timeout, [&] {
    mu_.AssertHeld();  // the predicate runs with the lock held
    return ended_;
  });
}

void LayerGatedImport::NoteWaited(int il) {
  if (il >= 0 && static_cast<size_t>(il) < waited_.size()) waited_[il] = true;
}

bool LayerGatedImport::CoveredAllLayers() const {
  for (size_t l = 0; l < layer_rows_end_.size(); ++l) {
    if (layer_rows_end_[l] != 0 && !waited_[l]) return false;
  }
  return true;
}

Status LayerGatedImport::Finish() {
  if (finished_) return Status::FailedPrecondition("gated import: finished twice");
  finished_ = true;
  if (thread_.joinable()) thread_.join();
  bool accepted;
  {
    MutexLock lock(&mu_);
    accepted = accepted_;
  }
  if (!accepted) {
    ctx_.ClearSlot(slot_);
    return Status::Corruption("gated import: llama.cpp rejected the state");
  }
  return Status::OK();
}

}  // namespace agentkv::engine
