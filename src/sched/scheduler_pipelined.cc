// Scheduler, pipelined restores: the call sites of sched/pipelined_restore.h
// (what a pipelined restore is and its contract are there).
//
// 1. Once the read is planned (an agent the table knows), or its manifest is
//    in (an agent it does not know yet, e.g. after a restart), the agent is
//    admitted (TryAdmit / FindRestoreSource -> PipelinedSource) and its slot
//    gets the landing's cells (StartPipelinedRestore).
// 2. Step() decodes its first chunk, each layer imported as its rows land,
//    when it is the only active turn (StepPipelined); with other turns
//    running it sits out, copying in the layers that landed between steps,
//    so their steps never wait for its read. A request that arrives while
//    the gated decode waits for rows, a cancel or a shutdown make it give way.
// 3. ResolvePipelined takes the read's result once the read completed: the
//    turn goes on only if the read verified every block and every layer is
//    in; otherwise it starts over cold, as a restore that fails does.
// 4. The inference thread never waits for the read beyond a bounded wait:
//    a turn cancelled, failed or shut down meanwhile abandons its restore
//    (AbandonPipelined): the slot is cleared and free at once, the read's
//    result dropped when it comes.
#include <algorithm>
#include <chrono>
#include <thread>

#include "sched/scheduler.h"
#include "sched/scheduler_types.h"
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv::sched {

bool Scheduler::PipelinedSource(const AgentKey& from, const std::shared_ptr<ReadLanding::Ticket>& in_flight,
                                const Agent& agent, RestoreSource* source) {
  if (!pipelined_ || in_flight == nullptr || tiers_.has_remote() || agent.fork_source) return false;
  if (!PipelinedRestore::Matches(*in_flight, ComputeBlockIds(ctx_.spec().fingerprint, agent.seq.tokens),
                                 agent.seq.tokens)) {
    return false;
  }
  source->state = api::CacheState::kWarm;
  source->pipelined = true;
  source->landing = in_flight;
  source->read_key = from;
  return true;
}

Status Scheduler::StartPipelinedRestore(Active& a, int slot, uint32_t n_keep, const RestoreSource& source) {
  auto restore = PipelinedRestore::Start(ctx_, slot, n_keep, source.landing, *source.read_key);
  if (!restore.ok()) {
    tiers_.DropRead(*source.read_key);  // its result would restore what just failed
    return restore.status();
  }
  a.pipelined = std::move(restore).value();
  return Status::OK();
}

bool Scheduler::StepPipelined(Active& a, bool alone, Status* decoded) {
  PipelinedRestore& r = *a.pipelined;
  if (!alone || r.yielded()) {
    (void)r.ImportLanded();  // no wait
    if (!PipelinedReadDone(a)) return false;  // sits this step out
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
  PipelinedRestore::DecodeStats stats;
  const auto start = Clock::now();
  *decoded = r.DecodeFirstChunk(ctx_, items, [&] { return GiveWay(a); }, &stats);
  AKV_LOG_DEBUG("pipelined restore of agent %s: gated decode of %zu tokens %.2f ms, %.2f ms of it waiting for the "
                "rows of %d layers%s",
                a.agent->key.agent_id.c_str(), items.size(),
                std::chrono::duration<double, std::milli>(Clock::now() - start).count(), stats.waited_ms,
                stats.layers_waited, stats.gave_way ? "; gave way" : "");
  // Usable: every layer's rows were in before it was computed, and the
  // read's last checks came while nothing else wanted this thread.
  if (decoded->ok() && r.complete() && WaitPipelinedRead(a)) {
    if (!ResolvePipelined(a)) {
      RestartCold(a);
      return false;
    }
    return true;  // the chunk is in: the caller records it
  }
  // Else the turn continues the usual way once every layer is in and its
  // read completed (no second gated decode); the chunk's positions hold
  // garbage.
  r.set_yielded();
  a.batch_fed = 0;
  a.batch_row = -1;
  if (Status s = ctx_.TruncateSlot(a.slot, pos0); !s.ok()) FailActive(a, s);
  return false;
}

bool Scheduler::GiveWay(const Active& a) {
  if (n_waiting_.load() > 0 || a.w->req.cancel.cancelled()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

bool Scheduler::PipelinedReadDone(const Active& a) { return tiers_.ReadDone(a.pipelined->read_key()); }

bool Scheduler::WaitPipelinedRead(const Active& a) {
  // Bounded: a read that does not complete by then is taken between steps.
  const auto deadline = Clock::now() + std::chrono::milliseconds(50);
  while (Clock::now() < deadline) {
    if (tiers_.WaitReadDone(a.pipelined->read_key(), std::chrono::milliseconds(1))) return true;
    if (GiveWay(a)) return false;
  }
  return false;
}

bool Scheduler::ResolvePipelined(Active& a) {
  std::unique_ptr<PipelinedRestore> r = std::move(a.pipelined);
  const bool complete = r->ImportLanded();  // no wait: the read completed, nothing more lands
  // The read's result (completed: no wait).
  AgentRead read = tiers_.TakeRead(r->read_key()).value_or(AgentRead{});
  a.usage.read_ms = read.read_ms;
  const bool verified = read.done && read.from_disk && read.record && read.record->tokens == a.committed_seq.tokens &&
                        read.blocks.size() == r->landing().planned_ids().size() &&
                        !r->landing().StateFor(read.blocks).empty();
  if (!complete || !verified) {
    AKV_LOG_WARN("pipelined restore of agent %s not usable (every layer in: %d; read verified: %d); prefilling cold",
                 a.agent->key.agent_id.c_str(), complete, verified);
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
  a.pipelined->Abandon();                    // the read writes no more rows; no wait for it
  tiers_.DropRead(a.pipelined->read_key());  // its result, when it comes, is discarded
  a.pipelined.reset();
  metrics_.CountPipelinedAbandoned();
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


