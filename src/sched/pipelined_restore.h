#pragma once
// PipelinedRestore: one turn's restore that runs while its agent's blocks
// are still being read (SchedulerOptions::pipelined_restore, on by default
// with a GPU; the why and the measurements: bench/RESULTS.md, stops 14, 15).
//
// 1. The read streams (ReadLanding::Ticket::Stream): every block tensor is
//    copied into the landing's state as it comes in, and the manifest is
//    handed over as soon as it is read (before the blocks).
// 2. Once the read is planned (an agent the table knows) or its manifest is
//    in (one it does not, e.g. after a restart), the agent is admitted if
//    the landing holds its blocks exactly (Matches) and Start has llama.cpp
//    import the landing's state as it fills (engine::LayerGatedImport).
// 3. Its first chunk may be decoded beside the import, each layer as soon
//    as that layer's rows are in (DecodeGated), giving way to any request
//    that arrives (it then waits for the import to end, like a turn that
//    is not alone).
// 4. Resolve takes the read's result: the turn goes on only if the read
//    verified every block it imported (checksums, the manifest); otherwise
//    it starts over cold, as a restore that fails does.
// 5. Nothing here waits for the read on the caller's behalf (WaitRead polls
//    a give-up condition); a turn that ends meanwhile hands its restore to
//    DrainingImports, which abandons it (the landing releases the import's
//    waits, the read's result is dropped when it comes) and keeps its slot
//    out of use until the import thread has copied what is left.
//
// Thread safety: the inference thread (it drives the llama context); the
// import runs on a thread of its own (engine/layer_gated_import.h).

#include <atomic>
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
  // Starts importing `landing` (read_key's read in flight, Matches) into
  // `slot`, positions [0, n_keep). On failure the read is dropped (its
  // result would restore what just failed) and the slot's contents are
  // unknown. `ctx`, `tiers` and `metrics` must outlive the restore.
  static Result<std::unique_ptr<PipelinedRestore>> Start(engine::Context& ctx, AgentTiers& tiers,
                                                         SchedulerMetrics& metrics, int slot, uint32_t n_keep,
                                                         std::shared_ptr<ReadLanding::Ticket> landing,
                                                         const AgentKey& read_key);
  // Not Resolved nor handed to DrainingImports: joins the import thread, which
  // may wait for the read (so always end one of those two ways).
  ~PipelinedRestore();

  bool ImportEnded() const { return import_->Ended(); }
  bool WaitImportEndedFor(std::chrono::microseconds timeout) const { return import_->WaitEndedFor(timeout); }
  // Whether the read completed (or its entry was dropped). No wait.
  bool ReadDone() const { return tiers_.ReadDone(read_key_); }
  // Waits for ReadDone, checking `give_up` every millisecond; false if it
  // said so first.
  bool WaitRead(const std::function<bool()>& give_up) const;

  // Decodes `items` (the turn's first chunk) into the slot, each layer once
  // its rows are in; while it waits for rows it polls `yield_now` (every
  // ~50 us) and gives up once that says so (a request, a task for the loop,
  // the stop, the turn's cancellation: the loop then serves them and never
  // waits for the read). True if the decode is usable: it did not give up,
  // it succeeded and every layer's rows were in before it was computed.
  // *decoded: the decode's status.
  bool DecodeGated(const std::vector<engine::BatchItem>& items, const std::function<bool()>& yield_now,
                   Status* decoded);
  // The gated decode was not used (a request came, a layer's rows did not):
  // the turn now waits for the import to end, as one that is not alone.
  void Yield() { yielded_ = true; }
  bool yielded() const { return yielded_; }

  // REQUIRES ImportEnded() or every row in, and ReadDone(): waits for
  // nothing. Finishes the import and takes the read into *read; true if the
  // read verified the imported blocks as those of `tokens` (the turn goes
  // on from them), else false (logged, counted: the turn restarts cold).
  // After it the restore is spent.
  bool Resolve(const std::vector<int32_t>& tokens, AgentRead* read);

 private:
  friend class DrainingImports;
  PipelinedRestore(engine::Context& ctx, AgentTiers& tiers, SchedulerMetrics& metrics,
                   std::shared_ptr<ReadLanding::Ticket> landing, std::unique_ptr<engine::LayerGatedImport> import,
                   const AgentKey& read_key);

  engine::Context& ctx_;
  AgentTiers& tiers_;
  SchedulerMetrics& metrics_;
  // The landing before the import: members are destroyed in reverse, and
  // the import's destructor joins a thread that reads the landing.
  std::shared_ptr<ReadLanding::Ticket> landing_;
  std::unique_ptr<engine::LayerGatedImport> import_;
  const AgentKey read_key_;
  bool yielded_ = false;
};

// Abandoned pipelined restores whose import thread may still copy rows (from
// an abandoned landing: garbage) into their slot.
// Thread safety: the inference thread.
class DrainingImports {
 public:
  // Gives `restore` up without waiting for its read: its landing is
  // abandoned (the import's waits end, the read copies no more), its read's
  // entry dropped (the result is discarded when it comes); `slot` drains
  // until Reap.
  void Add(std::unique_ptr<PipelinedRestore> restore, int slot);
  // Whether `slot` still receives an abandoned import's rows: it must be
  // neither cleared nor handed out until Reap cleared it.
  bool Draining(int slot) const;
  // Clears the slots of the imports that ended; `wait` (shutdown): of all,
  // joining each (an abandoned import waits for no read).
  void Reap(engine::Context& ctx, bool wait);

 private:
  struct Drain {
    std::unique_ptr<PipelinedRestore> restore;
    int slot = -1;
  };
  std::vector<Drain> drains_;
};

}  // namespace agentkv::sched
