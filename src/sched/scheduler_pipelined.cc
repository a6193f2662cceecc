// Scheduler, inference thread: its turns' pipelined restores (what they are:
// sched/pipelined_restore.h): a source from a read still in flight, the
// restoring phase of an iteration (the first chunk decoded alone, each layer
// imported as its rows land; else the layers that landed copied in between
// steps), and a turn that ends meanwhile giving its restore up instead of
// waiting for the read (its slot cleared and free at once).
#include <algorithm>
#include <chrono>

#include "sched/scheduler.h"
#include "sched/scheduler_types.h"

namespace agentkv::sched {

bool Scheduler::PipelinedSource(const AgentKey& from, const std::shared_ptr<ReadLanding::Ticket>& in_flight,
                                const Agent& agent, RestoreSource* source) {
  if (!pipelined_ || in_flight == nullptr || tiers_.has_remote() || agent.fork_source) return false;
  if (!PipelinedRestore::Matches(*in_flight, agent.seq.tokens, ctx_.spec().fingerprint)) return false;
  source->state = api::CacheState::kWarm;
  source->pipelined = true;
  source->landing = in_flight;
  source->read_key = from;
  return true;
}

bool Scheduler::StepRestoring() {
  size_t live = 0;
  Active* piped = nullptr;
  for (auto& up : active_) {
    if (up->done) continue;
    ++live;
    if (up->restore) piped = up.get();
  }
  if (piped == nullptr) return false;
  if (StepPipelined(*piped, live == 1)) {
    RecordPrefill(*piped);
    return true;
  }
  // Sitting out with nothing else to run: wait for its next rows (or, once
  // every layer is in, its read) a little (then the loop admits whoever came
  // and checks cancellations), rather than spin.
  if (live == 1 && piped->restore && !piped->done) {
    if (!piped->restore->complete()) {
      (void)piped->restore->WaitNextLayer(std::chrono::milliseconds(2));
      return true;
    }
    inbox_.Nap(std::chrono::milliseconds(2));  // a read's completion or a request ends it
    return true;
  }
  return false;
}

bool Scheduler::StepPipelined(Active& a, bool alone) {
  PipelinedRestore& restore = *a.restore;
  if (!alone || restore.yielded()) {
    (void)restore.ImportLanded();  // the layers that landed, no wait
    if (!restore.ReadDone()) return false;  // sits this step out
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
  Status decoded;
  // Anything else that wants this thread ends the gated decode's and the read's waits: a request,
  // a RunOnLoop task (/metrics, the admin API), the stop, the turn's cancellation. The chunk is
  // used only if the read's last checks also came while nothing did.
  const std::function<bool()> give_up = [&] {
    return n_waiting_.load() > 0 || inbox_.WantsLoop() || a.w->req.cancel.cancelled();
  };
  if (restore.DecodeGated(items, give_up, &decoded) && restore.WaitRead(give_up)) {
    if (!ResolvePipelined(a)) {
      RestartCold(a);
      return false;
    }
    return true;  // the chunk is in: the caller records it
  }
  // Else (a request came, a layer's rows did not, the decode failed): the
  // turn continues the usual way, its layers copied in between steps, once
  // its read completed (no second gated decode); the chunk's positions hold
  // garbage.
  restore.Yield();
  a.batch_fed = 0;
  a.batch_row = -1;
  if (Status s = ctx_.TruncateSlot(a.slot, pos0); !s.ok()) {
    AbandonPipelined(a);
    FailActive(a, s);  // (clears the slot)
  }
  return false;
}

bool Scheduler::ResolvePipelined(Active& a) {
  AgentRead read;
  const bool usable = a.restore->Resolve(a.committed_seq.tokens, &read);
  a.restore.reset();
  a.usage.read_ms = read.read_ms;
  if (!usable) return false;
  a.restored_blocks = read.blocks;
  (void)pool_.Put(a.agent->key, read.blocks, /*dirty=*/false);  // hot next time, if it fits
  return true;
}

void Scheduler::AbandonPipelined(Active& a) {
  a.restore->Abandon();  // no wait for the read
  a.restore.reset();
}

bool Scheduler::SettlePipelined(Active& a) {
  if (!a.restore) return true;
  if (a.restore->ReadDone() && ResolvePipelined(a)) return true;
  if (a.restore) AbandonPipelined(a);  // its read is not waited for
  FailActive(a, Status::Cancelled("the turn ended before its restore was verified"));
  return false;
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
