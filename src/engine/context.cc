#include "engine/context.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "engine/compute_team.h"
#include "engine/row_copy_pipeline.h"
#include "ggml.h"
#include "llama.h"
#include "util/log.h"

namespace agentkv::engine {
namespace {

// Why: llama.cpp's sliding-window cache keeps only the window per sequence
// when swa_full is off; restores of windowed layers need exactly the window,
// which the export holds. Full-size SWA caches would cost Gemma-class models
// ~6x more KV memory for nothing we can reuse (see docs/engine.md).
constexpr bool kSwaFull = false;

// Below this a restore's rows are written before llama.cpp reads them: the
// workers of an overlapped import cost more to start than they would save.
constexpr size_t kOverlapImportMinBytes = 4u << 20;

// llama.cpp's compute threads for a context that may use `wanted`. Under
// ThreadSanitizer one: ggml's OpenMP workers meet at libgomp barriers that
// TSan cannot see, so every intercepted memcpy of a matmul chunk became a
// race report, suppressed (scripts/tsan.supp) only after its stack was
// walked; the scheduler tests ran 20x slower. Our own copy threads
// (n_threads()) are unaffected and stay checked.
int ComputeThreads(int wanted) {
#if defined(__SANITIZE_THREAD__)
  (void)wanted;
  return 1;
#else
  return wanted;
#endif
}

bool CanRoundSlotRows(const ContextOptions& o) {
  return SlotRowsCanRoundToRest(o.slot_type_k.value_or(o.type_k), o.slot_type_v.value_or(o.type_v), o.type_k,
                                o.type_v);
}

// ContextOptions::round_slot_rows resolved (REQUIRES: validated by Create).
bool RoundsSlotRows(const ContextOptions& o) { return o.round_slot_rows.value_or(CanRoundSlotRows(o)); }

}  // namespace

int Context::n_threads() const {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return options_.n_threads > 0 ? options_.n_threads : hw;
}

Context::~Context() {
  if (ctx_ != nullptr) llama_free(ctx_);
}

Result<std::unique_ptr<Context>> Context::Create(const Model& model, const ContextOptions& options) {
  const std::string op = "create context";
  if (options.n_slots < 1 || options.n_slots > 256) return Status::InvalidArgument(op + ": slots must be 1..256");
  if (options.slot_ctx < 16) return Status::InvalidArgument(op + ": slot context must be >= 16");
  if (options.n_batch < 1) return Status::InvalidArgument(op + ": n_batch must be >= 1");
  const bool quantized_v =
      options.type_v != KvType::kF16 || options.slot_type_v.value_or(options.type_v) != KvType::kF16;
  if (quantized_v && !options.flash_attn) {
    return Status::InvalidArgument(op + ": a quantized V cache needs flash attention");
  }
  if (options.round_slot_rows.value_or(false) && !CanRoundSlotRows(options)) {
    return Status::InvalidArgument(op + ": rounding slot rows to rest needs f16 slots over q4_0 blocks");
  }
  const bool round_rows = RoundsSlotRows(options);
  auto ctx = std::unique_ptr<Context>(new Context(model, options));
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(options.slot_ctx) * static_cast<uint32_t>(options.n_slots);
  cp.n_batch = static_cast<uint32_t>(options.n_batch);
  cp.n_ubatch = static_cast<uint32_t>(options.n_batch);
  cp.n_seq_max = static_cast<uint32_t>(options.n_slots);
  cp.n_threads = ComputeThreads(ctx->n_threads());
  cp.n_threads_batch = cp.n_threads;
  cp.type_k = static_cast<ggml_type>(KvTypeToGgml(options.slot_type_k.value_or(options.type_k)));
  cp.type_v = static_cast<ggml_type>(KvTypeToGgml(options.slot_type_v.value_or(options.type_v)));
  cp.flash_attn_type = options.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  // Rows rounded as they are written: a restore (q4_0 -> f16) then writes
  // exactly the f16 values the resident slot held (patch 0006).
  cp.type_kv_round = round_rows ? GGML_TYPE_Q4_0 : GGML_TYPE_COUNT;
  cp.kv_unified = false;  // one stream per slot: agents never attend to each other's cells
  cp.swa_full = kSwaFull;
  cp.no_perf = true;
  ctx->copy_role_.assign(static_cast<size_t>(options.n_slots), 0);
  ctx->ctx_ = llama_init_from_model(model.raw(), cp);
  if (ctx->ctx_ == nullptr) return Status::Internal(op + ": llama.cpp could not create the context");
  // The start-up decodes run on a thread of their own that ends here. With
  // OpenMP (ggml-cpu) every thread that computes a graph keeps a team of
  // idle compute workers for as long as it lives; a second team (the
  // caller's, beside the inference thread's) makes libgomp count more
  // workers than cores and stop spinning at its barriers: every graph node
  // then sleeps and wakes through futexes, which made decode ~2.5x slower on
  // 2 cores. Only the thread that later calls Decode() keeps a team.
  // The probe sizes the staging buffer, whose reservation may then run
  // beside the warm-up (ContextOptions::staging_reserve).
  Status started;
  std::thread([&] { started = ctx->Probe(); }).join();
  AGENTKV_RETURN_IF_ERROR(started.WithContext(op));
  ctx->ReserveStaging();
  if (options.warmup) {
    std::thread([&] { started = ctx->Warmup(); }).join();
    AGENTKV_RETURN_IF_ERROR(started.WithContext(op));
  }
  return ctx;
}

Status Context::Probe() {
  const llama_vocab* vocab = model_.vocab();
  llama_token tok = llama_vocab_bos(vocab);
  if (tok == LLAMA_TOKEN_NULL) tok = 0;
  BatchItem item{0, tok, 0, false};
  AGENTKV_RETURN_IF_ERROR(Decode({&item, 1}));
  AGENTKV_ASSIGN_OR_RETURN(auto state, ExportSlotState(0));
  ClearSlot(0);
  AGENTKV_ASSIGN_OR_RETURN(StateShape shape, InferStateShape(state));
  // A hybrid sliding-window model has two caches: full-attention layers, then
  // the windowed ones (llama_kv_cache_iswa writes base then swa).
  const int32_t n_swa = model_.info().n_swa;
  if (shape.sections.size() == 2 && n_swa > 0) {
    shape.sections[1].swa_window = static_cast<uint32_t>(n_swa);
  } else if (shape.sections.size() != 1) {
    return Status::Unsupported("kv layout with " + std::to_string(shape.sections.size()) + " caches");
  }
  AGENTKV_ASSIGN_OR_RETURN(spec_, MakeHybridCacheSpec(shape, options_.slot_type_k.value_or(options_.type_k),
                                                      options_.slot_type_v.value_or(options_.type_v), options_.type_k,
                                                      options_.type_v, options_.flash_attn, kSwaFull,
                                                      model_.info().identity_hash));
  spec_.slot_rows_rounded = RoundsSlotRows(options_);
  return Status::OK();
}

Status Context::Warmup() {
  // Two tokens, the last with logits: a prompt batch and the output layer,
  // as llama.cpp's common_init_from_params warms up (BOS, EOS).
  const llama_vocab* vocab = model_.vocab();
  llama_token bos = llama_vocab_bos(vocab);
  llama_token eos = llama_vocab_eos(vocab);
  if (bos == LLAMA_TOKEN_NULL) bos = 0;
  if (eos == LLAMA_TOKEN_NULL) eos = bos;
  const BatchItem items[2] = {{0, bos, 0, false}, {0, eos, 1, true}};
  AGENTKV_RETURN_IF_ERROR(Decode(items));
  ClearSlot(0);
  llama_synchronize(ctx_);
  return Status::OK();
}

void Context::ReserveStaging() {
  const uint64_t bytes =
      MaxStateBytes(spec_.slot_shape, static_cast<uint32_t>(options_.slot_ctx), static_cast<uint32_t>(options_.n_slots));
  // Its time is part of agentkv's start-up (issue 34 reports it) unless reserved in the background; beside the
  // warm-up (kBeside) it overlaps it. Reserving it in the background made the CPU start-up slower (bench/RESULTS.md,
  // stop 29).
  staging_.Reserve(bytes, options_.staging_reserve, "staging buffer", "staging-reserve");
}

bool Context::BindComputeThreadsToCpus() const {
  // On a GPU the CPU team does next to nothing: nothing to gain there.
  if (model_.info().n_gpu_layers > 0) return false;
  return BindComputeTeamToCpus(ComputeThreads(n_threads()));
}

bool Context::OnLayer(int32_t il, bool ask, void* self) {
  auto* c = static_cast<Context*>(self);
  if (c->gate_ == nullptr) return !ask;  // (set during DecodeGated only)
  if (ask) return !c->gate_refused_ && !c->gate_->LayerReady(il);  // stop (and WaitLayer) only where rows may be missing
  if (c->gate_refused_) return false;
  if (!c->gate_->WaitLayer(il)) c->gate_refused_ = true;
  return !c->gate_refused_;
}

Status Context::DecodeGated(std::span<const BatchItem> items, LayerGate* gate) {
  gate_ = gate;
  gate_refused_ = false;
  // (llama_set_layer_callback: patches/llama.cpp/0004; each stop is a
  // synchronisation, so it is set for this decode only.)
  llama_set_layer_callback(ctx_, &Context::OnLayer, this);
  Status s = Decode(items);
  llama_set_layer_callback(ctx_, nullptr, nullptr);
  gate_ = nullptr;
  if (s.ok() && gate_refused_) return Status::Cancelled("decode: abandoned before a layer whose rows did not come");
  return s;
}

Status Context::Decode(std::span<const BatchItem> items) {
  if (items.empty()) return Status::OK();
  if (static_cast<int>(items.size()) > options_.n_batch) {
    return Status::InvalidArgument("decode: batch of " + std::to_string(items.size()) + " > n_batch");
  }
  for (const BatchItem& it : items) {
    if (it.slot < 0 || it.slot >= options_.n_slots) {
      return Status::InvalidArgument("decode: bad slot " + std::to_string(it.slot));
    }
    if (it.pos >= options_.slot_ctx) {
      return Status::ResourceExhausted("decode: slot " + std::to_string(it.slot) + " is full (" +
                                       std::to_string(options_.slot_ctx) + " positions)");
    }
  }
  // llama.cpp gives a batch to its per-slot KV streams (kv_unified false) in
  // ubatches of increasing, consecutive sequence ids, taken in batch order
  // (llama_batch_allocr::split_equal, sequential): items in admission order
  // (slots 5, 3, 12, ...) became one ubatch per run, each a pass over all the
  // weights (16 agents decoding: 14 -> 38 ms a step on an H100). So the
  // items go in slot order (stable: a slot's own tokens keep theirs), and
  // Logits(i) maps the caller's row i to its place.
  batch_order_.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) batch_order_[i] = i;
  std::stable_sort(batch_order_.begin(), batch_order_.end(),
                   [&](size_t a, size_t b) { return items[a].slot < items[b].slot; });
  llama_batch batch = llama_batch_init(static_cast<int32_t>(items.size()), 0, 1);
  last_logit_rows_.assign(items.size(), -1);
  for (size_t row = 0; row < items.size(); ++row) {
    const size_t i = batch_order_[row];
    const BatchItem& it = items[i];
    batch.token[row] = it.token;
    batch.pos[row] = it.pos;
    batch.n_seq_id[row] = 1;
    batch.seq_id[row][0] = it.slot;
    batch.logits[row] = it.want_logits;
    if (it.want_logits) last_logit_rows_[i] = static_cast<int32_t>(row);
  }
  batch.n_tokens = static_cast<int32_t>(items.size());
  const int32_t rc = llama_decode(ctx_, batch);
  llama_batch_free(batch);
  // 0, 1 and 2 come after llama.cpp's memory update, which ran any queued copy.
  if (rc >= 0) copy_pending_ = false;
  if (rc == 1) return Status::ResourceExhausted("decode: no KV cells available");
  if (rc == 2) return Status::Cancelled("decode: aborted");
  if (rc != 0) return Status::Internal("decode: llama_decode returned " + std::to_string(rc));
  return Status::OK();
}

std::span<const float> Context::Logits(int i) const {
  const float* row = llama_get_logits_ith(ctx_, last_logit_rows_.at(i));
  return {row, static_cast<size_t>(n_vocab())};
}

int32_t Context::SlotLength(int slot) const {
  const llama_pos max = llama_memory_seq_pos_max(llama_get_memory(ctx_), slot);
  return max < 0 ? 0 : max + 1;
}

void Context::ClearSlot(int slot) { llama_memory_seq_rm(llama_get_memory(ctx_), slot, -1, -1); }

Status Context::TruncateSlot(int slot, int32_t n) {
  if (n >= SlotLength(slot)) return Status::OK();
  if (n <= 0) {
    ClearSlot(slot);
    return Status::OK();
  }
  for (const auto& s : spec_.shape.sections) {
    if (s.swa_window == 0) continue;
    // Going on from n tokens needs the window positions [n - W + 1, n) (see
    // seq_state.cc). The windowed cache drops its oldest cells lazily, so it
    // holds a contiguous run of positions from seq_pos_min on: enough when
    // that run starts early enough (a cut of one token always is).
    const int32_t need_lo = std::max<int32_t>(0, n + 1 - static_cast<int32_t>(s.swa_window));
    if (llama_memory_seq_pos_min(llama_get_memory(ctx_), slot) > need_lo) {
      return Status::FailedPrecondition("truncate: the sliding-window layers no longer hold the window before position " +
                                        std::to_string(n));
    }
  }
  if (!llama_memory_seq_rm(llama_get_memory(ctx_), slot, n, -1)) {
    ClearSlot(slot);
    return Status::FailedPrecondition("truncate: llama.cpp refused a partial removal; slot cleared");
  }
  return Status::OK();
}

size_t Context::SlotStateSize(int slot, int32_t pos_min) const {
  return llama_state_seq_get_size_from(ctx_, slot, 0, pos_min);
}

Status Context::CopySlotState(int slot, std::span<uint8_t> dst, int32_t pos_min) const {
  // A pending device copy into `slot` has not written its rows yet.
  if (ExportNeedsApply(slot)) AGENTKV_RETURN_IF_ERROR(ApplyPendingCopies().WithContext("export slot"));
  // Our llama.cpp patch (patches/llama.cpp): cells below pos_min stay where they are.
  const size_t written = llama_state_seq_get_data_from(ctx_, dst.data(), dst.size(), slot, 0, pos_min);
  if (written != dst.size()) {
    return Status::Internal("export slot: wrote " + std::to_string(written) + " of " + std::to_string(dst.size()));
  }
  return Status::OK();
}

Result<std::vector<uint8_t>> Context::ExportSlotState(int slot) const {
  std::vector<uint8_t> out(SlotStateSize(slot));
  AGENTKV_RETURN_IF_ERROR(CopySlotState(slot, out));
  return out;
}

Status Context::ImportSlotState(int slot, std::span<const uint8_t> state) {
  return SetSlotState(slot, state, nullptr, nullptr);
}

bool Context::CanCopyOnDevice(int src, int dst, int32_t n) const {
  if (!options_.device_slot_copy.value_or(model_.info().n_gpu_layers > 0)) return false;
  const bool windowed = spec_.HasSlidingWindow();
  // Windowed layers: an export leaves out the cells outside the window of
  // its last position (llama_kv_cache::state_write), so the staging route
  // gives dst only src's last window, and seq_cp all the cells src still
  // holds. Equal (and so bit-identical exports) only for the whole slot.
  if (windowed && n != SlotLength(src)) return false;
  // Recurrent state is not a cell table per position; such models also have
  // no spec (Probe) today. Checked so that it never silently gets this route.
  if (llama_model_is_recurrent(model_.raw()) || llama_model_is_hybrid(model_.raw())) return false;
  // ApplyPendingCopies must find a place for its scratch token (context.h).
  for (int s = 0; s < options_.n_slots; ++s) {
    if (s == dst) continue;  // full after the copy, as far as this goes
    const int32_t len = SlotLength(s);
    if (len == 0 || (!windowed && len < options_.slot_ctx)) return true;
  }
  return false;
}

Status Context::ApplyPendingCopies(int scratch) const {
  if (!copy_pending_) return Status::OK();
  // llama.cpp runs its queued stream copies at the start of llama_decode
  // (llama_context::memory_update); it has no other public call that does.
  // So: one token, no logits, in a slot where it disturbs nothing.
  const bool windowed = spec_.HasSlidingWindow();
  if (scratch < 0) {
    for (int s = 0; s < options_.n_slots && scratch < 0; ++s) {
      if (SlotLength(s) == 0) scratch = s;
    }
  }
  if (scratch < 0 && !windowed) {
    // Full attention: a cell is only taken if free, and freeing it again
    // leaves the slot's cells as they were.
    for (int s = 0; s < options_.n_slots && scratch < 0; ++s) {
      if (SlotLength(s) < options_.slot_ctx) scratch = s;
    }
  }
  if (scratch < 0) return Status::Internal("apply slot copies: no slot can take the scratch token");
  const int32_t pos = SlotLength(scratch);
  llama_token tok = llama_vocab_bos(model_.vocab());
  if (tok == LLAMA_TOKEN_NULL) tok = 0;
  llama_batch batch = llama_batch_init(1, 0, 1);
  batch.token[0] = tok;
  batch.pos[0] = pos;
  batch.n_seq_id[0] = 1;
  batch.seq_id[0][0] = scratch;
  batch.logits[0] = false;
  batch.n_tokens = 1;
  const int32_t rc = llama_decode(ctx_, batch);
  llama_batch_free(batch);
  last_logit_rows_.clear();
  if (rc < 0) return Status::Internal("apply slot copies: llama_decode returned " + std::to_string(rc));
  copy_pending_ = false;
  std::fill(copy_role_.begin(), copy_role_.end(), uint8_t{0});
  ++copy_counts_.applied;
  llama_memory_seq_rm(llama_get_memory(ctx_), scratch, pos, -1);  // (rc 1: nothing was placed)
  return Status::OK();
}

Status Context::CopySlotPrefix(int src, int dst, int32_t n) {
  if (src == dst) return Status::InvalidArgument("copy slot: source and destination are slot " + std::to_string(src));
  const int32_t src_len = SlotLength(src);
  if (n > src_len) {
    return Status::OutOfRange("copy slot: " + std::to_string(n) + " positions > the " + std::to_string(src_len) +
                              " of slot " + std::to_string(src));
  }
  if (n <= 0) {
    ClearSlot(dst);
    return Status::OK();
  }
  llama_memory_t mem = llama_get_memory(ctx_);
  if (CanCopyOnDevice(src, dst, n)) {
    // Cells now, rows at the next llama_decode (context.h).
    llama_memory_seq_cp(mem, src, dst, -1, -1);
    if (!copy_pending_) std::fill(copy_role_.begin(), copy_role_.end(), uint8_t{0});
    copy_pending_ = true;
    copy_role_[src] |= kCopySrc;
    copy_role_[dst] |= kCopyDst;
    if (SlotLength(dst) == src_len && llama_memory_seq_pos_min(mem, dst) == llama_memory_seq_pos_min(mem, src)) {
      ++copy_counts_.device;
      Status s = TruncateSlot(dst, n);
      if (!s.ok()) ClearSlot(dst);
      return s;
    }
    ClearSlot(dst);  // not the copy we asked for: the staging route below (its import applies the queue first)
  }
  ++copy_counts_.staged;
  std::span<uint8_t> buf = staging_.Get(SlotStateSize(src));
  AGENTKV_RETURN_IF_ERROR(CopySlotState(src, buf));
  AGENTKV_RETURN_IF_ERROR(ImportSlotState(dst, buf));
  Status s = TruncateSlot(dst, n);
  if (!s.ok()) ClearSlot(dst);
  return s;
}

Status Context::ClearSlotForImport(int slot) {
  ClearSlot(slot);
  // A queued copy would overwrite rows written into its dst, or copy the
  // new rows of its src: apply it first, the cleared slot taking the token.
  if (ImportNeedsApply(slot)) return ApplyPendingCopies(slot).WithContext("import slot");
  return Status::OK();
}

Status Context::SetSlotState(int slot, std::span<const uint8_t> state, llama_state_wait_fn wait, void* wait_user) {
  AGENTKV_RETURN_IF_ERROR(ClearSlotForImport(slot));
  const size_t read = llama_state_seq_set_data_wait(ctx_, state.data(), state.size(), slot, 0, wait, wait_user);
  if (read == 0) {
    ClearSlot(slot);
    return Status::Corruption("import slot: llama.cpp rejected the state");
  }
  return Status::OK();
}

Result<std::vector<KvBlock>> Context::ExportSlotBlocks(int slot, uint32_t first_block) const {
  const int32_t n = SlotLength(slot);
  if (int64_t{first_block} * kBlockTokens >= n) return std::vector<KvBlock>{};  // nothing new (or empty)
  // Only the rows of the blocks asked for leave the device: a turn's end
  // costs O(new tokens), not O(context).
  const auto pos_min = static_cast<int32_t>(std::min<int64_t>(int64_t{first_block} * kBlockTokens, n));
  std::span<uint8_t> buf = staging_.Get(SlotStateSize(slot, pos_min));
  AGENTKV_RETURN_IF_ERROR(CopySlotState(slot, buf, pos_min));
  return StateToBlocks(buf, spec_.layout(), static_cast<uint32_t>(n), first_block, n_threads());
}

Status Context::ImportSlotBlocks(int slot, const std::vector<const KvBlock*>& blocks, uint32_t n_tokens) {
  if (n_tokens > static_cast<uint32_t>(options_.slot_ctx)) {
    return Status::ResourceExhausted("import slot: " + std::to_string(n_tokens) + " positions > slot size");
  }
  const auto n_stream = static_cast<uint32_t>(options_.n_slots);
  const KvLayout layout = spec_.layout();  // hybrid slots: at-rest rows are converted into slot rows
  std::span<uint8_t> buf = staging_.Get(StateBytesForBlocks(blocks, layout, n_tokens, n_stream));
  if (!options_.overlap_import.value_or(buf.size() >= kOverlapImportMinBytes)) {
    AGENTKV_RETURN_IF_ERROR(WriteBlocksState(blocks, layout, n_tokens, n_stream, buf, n_threads()));
    return ImportSlotState(slot, buf);
  }
  AGENTKV_ASSIGN_OR_RETURN(BlocksStateWriter writer, BlocksStateWriter::Start(blocks, layout, n_tokens, n_stream, buf));
  RowCopyPipeline rows(writer, n_threads());  // its destructor waits for every row
  return SetSlotState(slot, buf, &RowCopyPipeline::WaitFn, &rows);
}

}  // namespace agentkv::engine
