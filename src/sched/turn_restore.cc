#include "sched/turn_restore.h"

#include <chrono>

#include "sched/restore_slot.h"

namespace agentkv::sched {

TurnRestore StartTurnRestore(engine::Context& ctx, AgentTiers& tiers, SchedulerMetrics& metrics,
                             const RestoreSource& source, int slot, uint32_t n_keep) {
  TurnRestore r;
  if (source.leader == nullptr && source.state == api::CacheState::kResident) {
    r.status = ctx.TruncateSlot(slot, static_cast<int32_t>(n_keep));
    return r;
  }
  const auto start = std::chrono::steady_clock::now();
  if (source.leader != nullptr) {
    r.status = ctx.CopySlotPrefix(source.leader->slot, slot, static_cast<int32_t>(n_keep));
  } else if (source.pipelined) {
    auto restore = PipelinedRestore::Start(ctx, tiers, metrics, slot, n_keep, source.landing, *source.read_key);
    r.status = restore.status();
    if (restore.ok()) r.pipelined = std::move(restore).value();
  } else {
    r.status = RestoreSlot(ctx, slot, source.blocks, n_keep, source.landing.get(), &r.landed);
  }
  r.restore_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace agentkv::sched
