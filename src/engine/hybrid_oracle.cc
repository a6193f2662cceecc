#include "engine/hybrid_oracle.h"

namespace agentkv::engine::testing {

Result<HybridOracleResult> RunHybridOracle(Context& ctx, const std::vector<int32_t>& head, int32_t next,
                                           int n_greedy) {
  constexpr int kA = 0, kC = 1, kB = 2;
  HybridOracleResult r;
  for (int slot : {kA, kC, kB}) ctx.ClearSlot(slot);
  AGENTKV_RETURN_IF_ERROR(Prefill(ctx, kA, head).status());
  AGENTKV_RETURN_IF_ERROR(Prefill(ctx, kC, head).status());
  AGENTKV_ASSIGN_OR_RETURN(r.blocks, ctx.ExportSlotBlocks(kA));
  std::vector<const KvBlock*> ptrs;
  for (const auto& b : r.blocks) ptrs.push_back(&b);
  const auto n = static_cast<uint32_t>(head.size());
  AGENTKV_RETURN_IF_ERROR(ctx.ImportSlotBlocks(kA, ptrs, n));
  AGENTKV_RETURN_IF_ERROR(ctx.ImportSlotBlocks(kB, ptrs, n));
  AGENTKV_ASSIGN_OR_RETURN(r.reexport, ctx.ExportSlotBlocks(kB));
  AGENTKV_ASSIGN_OR_RETURN(r.roundtrip_logits, Prefill(ctx, kA, {next}));
  AGENTKV_ASSIGN_OR_RETURN(r.restored_logits, Prefill(ctx, kB, {next}));
  AGENTKV_ASSIGN_OR_RETURN(r.cold_logits, Prefill(ctx, kC, {next}));
  AGENTKV_ASSIGN_OR_RETURN(r.roundtrip_tokens, GreedyDecode(ctx, kA, r.roundtrip_logits, n_greedy));
  AGENTKV_ASSIGN_OR_RETURN(r.restored_run, GreedyDecodeWithGaps(ctx, kB, r.restored_logits, n_greedy));
  AGENTKV_ASSIGN_OR_RETURN(r.cold_run, GreedyDecodeWithGaps(ctx, kC, r.cold_logits, n_greedy));
  r.restored_tokens = r.restored_run.tokens;
  return r;
}

}  // namespace agentkv::engine::testing
