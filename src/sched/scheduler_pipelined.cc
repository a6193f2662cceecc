// Scheduler, pipelined restores: a returning agent restored, and its first
// chunk decoded, while its blocks are still being read (SchedulerOptions::
// pipelined_restore, on by default with a GPU; the why and the measurements:
// bench/RESULTS.md, stops 14 and 15).
//
// 1. Its read streams (ReadLanding::Ticket::Stream): chunks by offset, every
//    block tensor copied into the landing's state as it comes in, and the
//    manifest handed over as soon as it is read (before the blocks).
// 2. Once the read is planned (an agent the table knows), or its manifest is
//    in (an agent it does not know yet, e.g. after a restart), the agent is
//    admitted (TryAdmit / FindRestoreSource -> PipelinedSource) and llama.cpp
//    starts importing the landing's state, following the read
//    (StartPipelinedRestore: engine::LayerGatedImport).
// 3. Step() decodes its first chunk beside the import when it is the only
//    active turn, each layer as soon as that layer's rows are in
//    (StepPipelined); with other turns running it sits out until its import
//    ended, so their steps never wait for its read. A request that arrives
//    while the gated decode waits for rows makes it yield the same way.
// 4. ResolvePipelined takes the read's result: the turn goes on only if the
//    read verified every block it imported (checksums, the manifest);
//    otherwise it starts over cold, as a restore that fails does.
// 5. The inference thread never waits for the read: it resolves a turn only
//    once its import ended and its read completed (polled each step), and a
//    turn cancelled, failed or shut down meanwhile abandons its restore
//    (AbandonPipelined): the landing releases the import's waits, the read's
//    result is dropped when it comes, and the slot stays out of use until
//    the import thread has copied what is left (ReapAbandonedImports).
#include <algorithm>
#include <chrono>
#include <thread>

#include "sched/scheduler.h"
#include "sched/scheduler_types.h"
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv::sched {
namespace {

// The gate of a pipelined first decode: waits for each layer's rows (polling
// the import) unless a request is waiting, then gives up (yields).
class YieldingGate : public engine::LayerGate {
 public:
  YieldingGate(engine::LayerGatedImport& import, const std::atomic<size_t>& n_waiting)
      : import_(import), n_waiting_(n_waiting) {}
  bool WaitLayer(int il) override {
    import_.NoteWaited(il);
    const auto start = std::chrono::steady_clock::now();
    bool in = true;
    while (!import_.LayerIn(il)) {
      if (import_.Ended()) {  // its rows came just now, or never will
        in = import_.LayerIn(il);
        break;
      }
      if (n_waiting_.load() > 0) {  // a request came: do not hold it up
        yielded_ = true;
        in = false;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    const auto end = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(end - start).count();
    waited_ms_ += ms;
    if (ms > 0.1) ++layers_waited_;
    last_wait_end_ = end;
    return in;
  }
  bool LayerReady(int il) override { return import_.LayerReady(il); }  // computes on through it
  bool yielded() const { return yielded_; }
  // When the last stop ended (the decode's start if it never stopped).
  std::chrono::steady_clock::time_point last_wait_end() const { return last_wait_end_; }
  double waited_ms() const { return waited_ms_; }    // for rows, in all
  int layers_waited() const { return layers_waited_; }  // layers whose rows were not all in yet

 private:
  engine::LayerGatedImport& import_;
  const std::atomic<size_t>& n_waiting_;
  bool yielded_ = false;
  std::chrono::steady_clock::time_point last_wait_end_ = std::chrono::steady_clock::now();
  double waited_ms_ = 0;
  int layers_waited_ = 0;
};

}  // namespace

bool Scheduler::PipelinedSource(const AgentKey& from, const std::shared_ptr<ReadLanding::Ticket>& in_flight,
                                const Agent& agent, RestoreSource* source) {
  if (!pipelined_ || in_flight == nullptr || tiers_.has_remote() || agent.fork_source) return false;
  const ReadLanding::Ticket& landing = *in_flight;
  if (!landing.Planned()) return false;
  // The landing holds the agent's blocks exactly: those of its tokens (as
  // the table knows them), all of them; and the manifest's, if it is in
  // already (else ResolvePipelined checks it once read).
  const std::vector<std::string>& planned = landing.planned_ids();
  const std::vector<std::string> ids = ComputeBlockIds(ctx_.spec().fingerprint, agent.seq.tokens);
  if (planned.empty() || ids != planned || landing.n_tokens() != agent.seq.tokens.size()) return false;
  if (std::shared_ptr<const AgentRecord> rec = landing.EarlyRecord(); rec != nullptr) {
    if (rec->tokens != agent.seq.tokens || rec->blocks.size() != planned.size()) return false;
    for (size_t i = 0; i < planned.size(); ++i) {
      if (rec->blocks[i].id != planned[i]) return false;
    }
  }
  source->state = api::CacheState::kWarm;
  source->pipelined = true;
  source->landing = in_flight;
  source->read_key = from;
  return true;
}

Status Scheduler::StartPipelinedRestore(Active& a, int slot, uint32_t n_keep, const RestoreSource& source) {
  ReadLanding::Ticket& landing = *source.landing;
  auto import = engine::LayerGatedImport::Start(ctx_, slot, landing.state(), *landing.writer(),
                                                &ReadLanding::Ticket::WaitFn, &landing);
  if (!import.ok()) {
    tiers_.DropRead(*source.read_key);  // its result would restore what just failed
    return import.status();
  }
  // The landing holds every position; the turn keeps n_keep (cells only:
  // the import thread copies rows).
  if (n_keep < landing.n_tokens()) {
    if (Status s = ctx_.TruncateSlot(slot, static_cast<int32_t>(n_keep)); !s.ok()) {
      landing.Abandon();  // the import then ends without waiting for the read
      (void)(*import)->Finish();
      ctx_.ClearSlot(slot);
      tiers_.DropRead(*source.read_key);
      return s;
    }
  }
  a.gated_import = std::move(import).value();
  a.pipelined_read = source.read_key;
  a.pipelined_landing = source.landing;
  return Status::OK();
}

bool Scheduler::StepPipelined(Active& a, bool alone, Status* decoded) {
  if (!alone || a.pipelined_yielded) {
    if (!a.gated_import->Ended() || !PipelinedReadDone(a)) return false;  // sits this step out
    if (!ResolvePipelined(a)) RestartCold(a);
    return false;  // joins the batch
  }
  // Its first chunk, alone, each layer as soon as its rows are in.
  const size_t take = std::min<size_t>({a.pending.size() - a.n_fed, static_cast<size_t>(options_.prefill_chunk),
                                        static_cast<size_t>(ctx_.options().n_batch)});
  const int32_t pos0 = static_cast<int32_t>(a.agent->seq.tokens.size());
  std::vector<engine::BatchItem> items;
  AppendPrefill(a, take, &items);
  metrics_.ObserveBatch(0, static_cast<uint32_t>(items.size()));
  YieldingGate gate(*a.gated_import, n_waiting_);
  const auto start = Clock::now();
  *decoded = ctx_.DecodeGated(items, &gate);
  // Where a pipelined turn's time went (AGENTKV_LOG=debug; bench/RESULTS.md, stop 14).
  const auto end = Clock::now();
  AKV_LOG_DEBUG("pipelined restore of agent %s: gated decode of %zu tokens %.2f ms, %.2f ms of it waiting for the "
                "rows of %d layers, %.2f ms after its last wait%s",
                a.agent->key.agent_id.c_str(), items.size(),
                std::chrono::duration<double, std::milli>(end - start).count(), gate.waited_ms(),
                gate.layers_waited(), std::chrono::duration<double, std::milli>(end - gate.last_wait_end()).count(),
                gate.yielded() ? "; yielded to a new request" : "");
  // Usable: every layer's rows were in before it was computed (so the import
  // waits for nothing more), and the read's last checks came while nothing
  // else wanted this thread.
  if (!gate.yielded() && decoded->ok() && a.gated_import->CoveredAllLayers() && WaitPipelinedRead(a)) {
    if (!ResolvePipelined(a)) {
      RestartCold(a);
      return false;
    }
    return true;  // the chunk is in: the caller records it
  }
  // Else (a request came, a layer's rows did not, the decode failed): the
  // turn continues the usual way once its import ended and its read
  // completed (no second gated decode); the chunk's positions hold garbage.
  a.pipelined_yielded = true;
  a.batch_fed = 0;
  a.batch_row = -1;
  if (Status s = ctx_.TruncateSlot(a.slot, pos0); !s.ok()) FailActive(a, s);
  return false;
}

bool Scheduler::PipelinedReadDone(const Active& a) { return tiers_.ReadDone(*a.pipelined_read); }

bool Scheduler::WaitPipelinedRead(const Active& a) {
  for (;;) {
    if (tiers_.WaitReadDone(*a.pipelined_read, std::chrono::milliseconds(1))) return true;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || n_waiting_.load() > 0 || a.w->req.cancel.cancelled()) return false;
  }
}

bool Scheduler::ResolvePipelined(Active& a) {
  const Status imported = a.gated_import->Finish();  // ended, or ends without waiting (every row is in)
  a.gated_import.reset();
  // The read's result (completed: no wait).
  AgentRead read = tiers_.TakeRead(*a.pipelined_read).value_or(AgentRead{});
  std::shared_ptr<ReadLanding::Ticket> landing = std::move(a.pipelined_landing);
  a.pipelined_read.reset();
  a.usage.read_ms = read.read_ms;
  const bool verified = read.done && read.from_disk && read.record && read.record->tokens == a.committed_seq.tokens &&
                        read.blocks.size() == landing->planned_ids().size() && !landing->StateFor(read.blocks).empty();
  if (!imported.ok() || !verified) {
    AKV_LOG_WARN("pipelined restore of agent %s not usable (import: %s; read verified: %d); prefilling cold",
                 a.agent->key.agent_id.c_str(), imported.ToString().c_str(), verified);
    metrics_.CountPipelinedRestore(/*fell_back=*/true);
    return false;
  }
  a.restored_blocks = read.blocks;
  (void)pool_.Put(a.agent->key, read.blocks, /*dirty=*/false);  // hot next time, if it fits
  metrics_.CountLandedRestore();
  metrics_.CountPipelinedRestore(/*fell_back=*/false);
  return true;
}

void Scheduler::AbandonPipelined(Active& a) {
  a.pipelined_landing->Abandon();  // the import's waits end; the read writes no more rows
  tiers_.DropRead(*a.pipelined_read);  // its result, when it comes, is discarded
  a.pipelined_read.reset();
  metrics_.CountPipelinedAbandoned();
  abandoned_imports_.push_back({std::move(a.pipelined_landing), std::move(a.gated_import), a.slot});
}

bool Scheduler::SlotDraining(int slot) const {
  return std::any_of(abandoned_imports_.begin(), abandoned_imports_.end(),
                     [slot](const AbandonedImport& d) { return d.slot == slot; });
}

void Scheduler::ReapAbandonedImports(bool wait) {
  std::erase_if(abandoned_imports_, [&](AbandonedImport& d) {
    if (!wait && !d.import->Ended()) return false;
    (void)d.import->Finish();  // its landing was abandoned: it waits for no read
    ctx_.ClearSlot(d.slot);
    return true;
  });
}

void Scheduler::RestartCold(Active& a) {
  Agent& agent = *a.agent;
  agent.seq = a.committed_seq;
  ctx_.ClearSlot(a.slot);
  a.n_fed = 0;
  a.batch_fed = 0;
  a.batch_row = -1;
  a.decoding = false;
  if (Status s = Prepare(*a.w, agent, a.slot, &a, RestoreSource{}); !s.ok()) FailActive(a, s);
}

}  // namespace agentkv::sched


