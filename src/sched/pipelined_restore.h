#pragma once
// PipelinedRestore: one turn's restore that runs while its agent's blocks
// are still being read (SchedulerOptions::pipelined_restore, on by default
// with a GPU; the why and the measurements: bench/HISTORY.md, stops 14, 15).
//
// 1. The read streams (ReadLanding::Ticket::Stream): every block tensor is
//    copied into the landing's state as it comes in, and the manifest is
//    handed over as soon as it is read (before the blocks).
// 2. Once the read is planned (an agent the table knows) or its manifest is
//    in (one it does not, e.g. after a restart), the agent is admitted if
//    the landing holds its blocks exactly (Matches) and Start gives the slot
//    the landing's cells (engine::LayerGatedImport).
// 3. Each layer's K and V rows are then copied into the slot once they have
//    landed: by the first chunk's gated decode, just before that layer is
//    computed (DecodeGated), or between steps (ImportLanded). All on the
//    caller's thread: nothing here has a thread of its own, and nothing
//    waits for the read beyond a bounded wait for rows that gives way to
//    whatever else wants the thread (a request, a task, the stop, the
//    turn's cancellation).
// 4. Resolve takes the read's result: the turn goes on only if every layer
//    is in and the read verified every block it imported (checksums, the
//    manifest); otherwise it starts over cold, as a restore that fails does.
// 5. A turn that ends meanwhile abandons its restore (Abandon): the landing
//    stops taking rows, the read's result is dropped when it comes, and the
//    caller clears the slot and may reuse it at once; the landing's buffers
//    stay the ticket's until the read returns.
//
// Thread safety: the inference thread (it drives the llama context).

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/context.h"
#include "engine/layer_gated_import.h"
#include "sched/agent_tiers.h"
#include "sched/metrics.h"
#include "sched/read_landing.h"

namespace agentkv::sched {

class PipelinedRestore {
 public:
  // Whether `landing` (its read in flight) holds exactly the blocks of
  // `tokens` under `fingerprint`: planned, all of them, and the manifest's,
  // if it is in already (else Resolve checks it once read).
  static bool Matches(const ReadLanding::Ticket& landing, const std::vector<int32_t>& tokens,
                      std::string_view fingerprint);
  // Clears `slot` (a pending device copy it takes part in applied first)
  // and gives it the cells of `landing` (read_key's read in flight,
  // Matches), positions [0, n_keep). On failure the read is dropped (its
  // result would restore what just failed) and the slot is cleared.
  // `ctx`, `tiers` and `metrics` must outlive the restore.
  static Result<std::unique_ptr<PipelinedRestore>> Start(engine::Context& ctx, AgentTiers& tiers,
                                                         SchedulerMetrics& metrics, int slot, uint32_t n_keep,
                                                         std::shared_ptr<ReadLanding::Ticket> landing,
                                                         const AgentKey& read_key);
  // End one with Resolve or Abandon (destruction alone leaves the read's
  // entry in AgentTiers and the slot's rows half imported).
  ~PipelinedRestore();

  // Between steps, without waiting: copies in the layers whose rows landed.
  // Returns complete().
  bool ImportLanded() { return import_->ImportLanded(); }
  // Waits at most `timeout` for the next layer's rows to land (no copy).
  bool WaitNextLayer(std::chrono::microseconds timeout) const { return import_->WaitNextLayer(timeout); }
  bool complete() const { return import_->Complete(); }  // every layer is in
  // Whether the read completed (or its entry was dropped). No wait.
  bool ReadDone() const { return tiers_.ReadDone(read_key_); }
  // Waits for ReadDone, checking `give_up` every millisecond; false if it
  // said so first.
  bool WaitRead(const std::function<bool()>& give_up) const;

  // Decodes `items` (the turn's first chunk) into the slot, each layer
  // imported just before it is computed once its rows are in; while it
  // waits for rows it polls `yield_now` (every `poll`) and gives the decode
  // up once that says so (a request, a task for the loop, the stop, the
  // turn's cancellation: the loop then serves them and never waits for the
  // read). True if the decode is usable: it did not give up, it succeeded
  // and every layer was in before it was computed. Else the chunk's
  // positions hold garbage (the caller cuts them). *decoded: the decode's
  // status.
  bool DecodeGated(const std::vector<engine::BatchItem>& items, const std::function<bool()>& yield_now,
                   Status* decoded, std::chrono::microseconds poll = std::chrono::microseconds(200));
  // The gated decode was not used (a request came, a layer's rows did not):
  // the turn now waits for every layer and the read, as one that is not
  // alone (no second gated decode).
  void Yield() { yielded_ = true; }
  bool yielded() const { return yielded_; }

  // REQUIRES ReadDone(): waits for nothing. Copies in what landed, takes
  // the read into *read; true if every layer is in and the read verified
  // the imported blocks as those of `tokens` (the turn goes on from them),
  // else false (logged, counted: the turn restarts cold). After it the
  // restore is spent.
  bool Resolve(const std::vector<int32_t>& tokens, AgentRead* read);

  // Gives the restore up without waiting for its read: the landing is
  // abandoned (the read copies no more rows), the read's entry dropped (its
  // result is discarded when it comes). The caller clears the slot, which
  // is then free. After it the restore is spent.
  void Abandon();

 private:
  PipelinedRestore(engine::Context& ctx, AgentTiers& tiers, SchedulerMetrics& metrics,
                   std::shared_ptr<ReadLanding::Ticket> landing, const AgentKey& read_key);

  engine::Context& ctx_;
  AgentTiers& tiers_;
  SchedulerMetrics& metrics_;
  // The landing before the import: the import reads its state.
  std::shared_ptr<ReadLanding::Ticket> landing_;
  std::unique_ptr<engine::LayerGatedImport> import_;
  const AgentKey read_key_;
  bool yielded_ = false;
};

}  // namespace agentkv::sched
