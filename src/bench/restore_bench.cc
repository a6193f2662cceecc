#include "bench/restore_bench.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "bench/stats.h"
#include "engine/seq_state.h"
#include "engine/tokenizer.h"

namespace agentkv::bench {

std::vector<KvBlock> ReplicateProbeRows(const KvBlock& probe, uint32_t n_tokens) {
  const uint32_t n_blocks = (n_tokens + kBlockTokens - 1) / kBlockTokens;
  std::vector<KvBlock> blocks(n_blocks);
  for (uint32_t b = 0; b < n_blocks; ++b) {
    KvBlock& out = blocks[b];
    out.index = b;
    out.n_tokens = std::min(kBlockTokens, n_tokens - b * kBlockTokens);
    for (const KvTensor& t : probe.tensors) {
      KvTensor r;
      r.name = t.name;
      r.row_bytes = t.row_bytes;
      r.first_pos = out.first_pos();
      r.n_rows = out.n_tokens;
      r.data.resize(static_cast<size_t>(r.row_bytes) * r.n_rows);
      for (uint32_t i = 0; i < r.n_rows; ++i) {
        std::copy(t.data.begin(), t.data.begin() + t.row_bytes, r.data.begin() + static_cast<size_t>(i) * r.row_bytes);
      }
      out.tensors.push_back(std::move(r));
    }
  }
  return blocks;
}

Result<RestoreBenchResult> RunRestoreBench(engine::Context& ctx, uint32_t n_tokens, int reps) {
  if (n_tokens == 0 || n_tokens >= static_cast<uint32_t>(ctx.options().slot_ctx)) {
    return Status::InvalidArgument("restore bench: need 1 <= tokens < slot context");
  }
  // Any token does: only the layout of its rows matters.
  const int32_t probe_token = std::max(0, engine::Tokenizer(ctx.model()).Bos());
  ctx.ClearSlot(0);
  engine::BatchItem item{0, probe_token, 0, false};
  AGENTKV_RETURN_IF_ERROR(ctx.Decode({&item, 1}));
  AGENTKV_ASSIGN_OR_RETURN(auto probe, ctx.ExportSlotBlocks(0));
  ctx.ClearSlot(0);
  if (probe.size() != 1) return Status::Internal("restore bench: probe export is not one block");
  const std::vector<KvBlock> blocks = ReplicateProbeRows(probe[0], n_tokens);
  std::vector<const KvBlock*> ptrs;
  for (const auto& b : blocks) ptrs.push_back(&b);

  const engine::KvLayout shape = ctx.spec().layout();  // slot rows <-> at-rest blocks, as served
  const int threads = ctx.n_threads();  // as the served path copies
  const auto n_stream = static_cast<uint32_t>(ctx.options().n_slots);
  RestoreBenchResult result;
  result.n_tokens = n_tokens;
  for (const auto& b : blocks) result.kv_bytes += b.payload_bytes();
  result.state_bytes = engine::StateBytesForBlocks(ptrs, shape, n_tokens, n_stream);
  // Separate buffer for the staged measurements, faulted in before timing.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[result.state_bytes]());
  const std::span<uint8_t> state(buf.get(), result.state_bytes);

  using Clock = std::chrono::steady_clock;
  for (int rep = -1; rep < reps; ++rep) {  // rep -1: warm-up
    RestoreRep r;
    auto t0 = Clock::now();
    AGENTKV_RETURN_IF_ERROR(engine::WriteBlocksState(ptrs, shape, n_tokens, n_stream, state, threads));
    r.write_state_ms = MsSince(t0);
    t0 = Clock::now();
    AGENTKV_RETURN_IF_ERROR(ctx.ImportSlotState(0, state));
    r.set_state_ms = MsSince(t0);
    t0 = Clock::now();
    AGENTKV_ASSIGN_OR_RETURN(auto raw, ctx.ExportSlotState(0));
    r.get_state_ms = MsSince(t0);
    t0 = Clock::now();
    AGENTKV_ASSIGN_OR_RETURN(auto split, engine::StateToBlocks(raw, shape, n_tokens, 0, threads));
    r.state_to_blocks_ms = MsSince(t0);
    ctx.ClearSlot(0);

    t0 = Clock::now();
    AGENTKV_RETURN_IF_ERROR(ctx.ImportSlotBlocks(0, ptrs, n_tokens));
    r.import_ms = MsSince(t0);
    t0 = Clock::now();
    AGENTKV_ASSIGN_OR_RETURN(auto exported, ctx.ExportSlotBlocks(0));
    r.export_ms = MsSince(t0);
    ctx.ClearSlot(0);
    if (exported.size() != blocks.size() || split.size() != blocks.size()) {
      return Status::Internal("restore bench: export returned a different block count");
    }
    if (rep >= 0) result.reps.push_back(r);
  }
  return result;
}

}  // namespace agentkv::bench
