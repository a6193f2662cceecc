#pragma once
// The one route from where a turn's cache is to its slot. FindRestoreSource
// (or a prefix donor) fills a RestoreSource; StartTurnRestore puts the
// prefix the turn keeps into the slot from it:
// - a leader's slot (a running turn that computed the shared prefix):
//   copied slot to slot (engine::Context::CopySlotPrefix);
// - the agent's own resident slot: cut to the kept prefix;
// - a read still running (pipelined): a PipelinedRestore that imports the
//   blocks as they land (sched/pipelined_restore.h);
// - blocks (hot, warm, remote): RestoreSlot, from the read landing when it
//   holds them all.
//
// Thread safety: the inference thread (it drives the llama context).

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "api/backend.h"
#include "engine/context.h"
#include "kv/block_pool.h"
#include "sched/agent_table.h"
#include "sched/pipelined_restore.h"
#include "sched/read_landing.h"

namespace agentkv::sched {

// Where a turn restores its agent from (Scheduler::FindRestoreSource).
struct RestoreSource {
  api::CacheState state = api::CacheState::kCold;
  std::vector<PoolBlock> blocks;  // hot / warm
  double read_ms = 0.0;           // warm: the disk read's duration
  std::optional<AgentKey> read_key;  // its blocks are this key's read (AgentTiers; dropped once admitted)
  std::shared_ptr<ReadLanding::Ticket> landing;  // warm: the read's landed state (ReadLanding::Ticket::StateFor)
  bool pipelined = false;  // the read of read_key is still running: restore from `landing` as it fills
  // A leader (sched/prefix_donor.h): copy the common prefix from this busy
  // agent's slot (the source's state is then kResident). Valid during the
  // admission that set it only.
  const Agent* leader = nullptr;

  // Whether the restore imports `blocks` (not a slot nor a running read).
  bool from_blocks() const { return leader == nullptr && state != api::CacheState::kResident && !pipelined; }
};

struct TurnRestore {
  Status status;  // not ok: the slot's contents are unknown (the caller clears it and prefills cold)
  double restore_ms = 0.0;  // the copy or import (0 for the agent's own resident slot)
  bool landed = false;      // blocks restored from the read landing's state
  std::unique_ptr<PipelinedRestore> pipelined;  // set: the import still runs beside the read
};

// Puts positions [0, n_keep) of `source` into `slot` (for the agent's own
// resident slot: `slot` is it). REQUIRES 0 < n_keep <= what the source
// holds (PlanTurn's n_keep). `ctx`, `tiers` and `metrics` must outlive a
// pipelined restore.
TurnRestore StartTurnRestore(engine::Context& ctx, AgentTiers& tiers, SchedulerMetrics& metrics,
                             const RestoreSource& source, int slot, uint32_t n_keep);

}  // namespace agentkv::sched
