#pragma once
// PipelinedRestore: one returning agent's restore that follows its disk read
// (SchedulerOptions::pipelined_restore, on by default with a GPU; the why and
// the measurements: bench/RESULTS.md, stops 14 and 15).
//
// The read streams into a ReadLanding::Ticket (sched/read_landing.h); once
// its plan is known the turn is admitted and Start gives the slot its cells
// (engine::LayerGatedImport). Each layer's K and V rows are then copied
// into the slot once they have landed — by the first chunk's gated decode
// just before that layer is computed (DecodeFirstChunk), or between steps
// (ImportLanded) — all on the inference thread: nothing here has a thread of
// its own, and nothing waits for the read beyond a bounded wait for rows.
// The scheduler uses the result only once the read verified every block
// (ReadLanding::Ticket::StateFor) and every layer is in (complete()).
//
// Contract: inference thread only. Abandon (a turn cancelled, failed, shut
// down or refused) never waits for the read: the landing stops taking rows,
// the import is dropped, and the caller clears the slot and may reuse it at
// once; the landing's buffers stay the ticket's until the read returns.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/layer_gated_import.h"
#include "sched/read_landing.h"
#include "kv/block_pool.h"
#include "util/status.h"

namespace agentkv::sched {

class PipelinedRestore {
 public:
  // Whether `landing`, a read still in flight, can restore an agent of
  // `tokens` whose blocks are `block_ids`: its plan is exactly those blocks
  // (and its manifest, if read already, says so).
  static bool Matches(const ReadLanding::Ticket& landing, const std::vector<std::string>& block_ids,
                      const std::vector<int32_t>& tokens);

  // Clears `slot` and gives it the landing's cells, positions [0, n_keep)
  // (n_keep <= landing->n_tokens()); Corruption / the truncation's error
  // with the slot cleared. `read_key` names the read in AgentTiers.
  static Result<std::unique_ptr<PipelinedRestore>> Start(engine::Context& ctx, int slot, uint32_t n_keep,
                                                          std::shared_ptr<ReadLanding::Ticket> landing,
                                                          AgentKey read_key);

  // What a gated first decode did (AGENTKV_LOG=debug; bench/RESULTS.md, stop 14).
  struct DecodeStats {
    double waited_ms = 0;     // for rows, in all
    int layers_waited = 0;    // layers whose rows were not all in when computed
    bool gave_way = false;    // a wait for rows ended because give_way() said so
  };
  // Decodes `items` (the first chunk, in the slot) with every layer imported
  // as its rows land, just before it is computed. While it waits for rows
  // it polls give_way() every `poll` and gives the decode up when it says
  // so. OK and complete(): the decode is usable. Otherwise its positions
  // hold garbage: the caller cuts them (TruncateSlot) and the restore goes
  // on between steps.
  Status DecodeFirstChunk(engine::Context& ctx, std::span<const engine::BatchItem> items,
                          const std::function<bool()>& give_way, DecodeStats* stats,
                          std::chrono::microseconds poll = std::chrono::microseconds(200));

  // Between steps, without waiting: copies in the layers whose rows landed.
  // Returns complete().
  bool ImportLanded() { return import_->ImportLanded(); }
  // Waits at most `timeout` for the next layer's rows (no copy).
  bool WaitNextLayer(std::chrono::microseconds timeout) const { return import_->WaitNextLayer(timeout); }
  bool complete() const { return import_->Complete(); }

  // Its gated decode was given up: the turn now waits for the read.
  bool yielded() const { return yielded_; }
  void set_yielded() { yielded_ = true; }

  const AgentKey& read_key() const { return read_key_; }
  const ReadLanding::Ticket& landing() const { return *landing_; }

  // Gives the restore up without waiting for the read (see the contract).
  // The caller clears the slot and drops the read (AgentTiers::DropRead).
  void Abandon();

 private:
  PipelinedRestore(std::shared_ptr<ReadLanding::Ticket> landing, AgentKey read_key)
      : landing_(std::move(landing)), read_key_(std::move(read_key)) {}

  // (The landing before the import: the import reads its state.)
  std::shared_ptr<ReadLanding::Ticket> landing_;
  std::unique_ptr<engine::LayerGatedImport> import_;
  const AgentKey read_key_;
  bool yielded_ = false;
};

}  // namespace agentkv::sched
