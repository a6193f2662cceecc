#include "sched/restore_slot.h"

#include "engine/seq_state.h"
#include "sched/turn_plan.h"
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv::sched {
namespace {

std::vector<const KvBlock*> Pointers(const std::vector<PoolBlock>& blocks) {
  std::vector<const KvBlock*> ptrs;
  ptrs.reserve(blocks.size());
  for (const auto& b : blocks) ptrs.push_back(b.block.get());
  return ptrs;
}

}  // namespace

uint32_t RestorableTokens(std::vector<PoolBlock>* blocks, const std::vector<int32_t>& tokens,
                          const engine::ModelCacheSpec& spec) {
  blocks->resize(MatchingBlocks(*blocks, ComputeBlockIds(spec.fingerprint, tokens)));
  if (blocks->empty()) return 0;
  return engine::RestorablePrefix(Pointers(*blocks), spec.shape, static_cast<uint32_t>(tokens.size()));
}

Status RestoreSlot(engine::Context& ctx, int slot, const std::vector<PoolBlock>& blocks, uint32_t n_keep,
                   const ReadLanding::Ticket* landing, bool* landed) {
  *landed = false;
  if (landing != nullptr && n_keep <= landing->n_tokens()) {
    if (std::span<const uint8_t> state = landing->StateFor(blocks); !state.empty()) {
      Status s = ctx.ImportSlotState(slot, state);
      // The landing holds every position of the blocks; the turn keeps n_keep.
      if (s.ok() && n_keep < landing->n_tokens()) s = ctx.TruncateSlot(slot, static_cast<int32_t>(n_keep));
      if (s.ok()) {
        *landed = true;
        return s;
      }
      AKV_LOG_WARN("restore from the read landing failed (%s); restoring from the blocks", s.ToString().c_str());
    }
  }
  return ctx.ImportSlotBlocks(slot, Pointers(blocks), n_keep);
}

}  // namespace agentkv::sched
