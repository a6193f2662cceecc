// Scheduler, inference thread: the loop and one iteration (batch build,
// decode, sampling, streaming, finishing).
#include <algorithm>
#include <cassert>
#include <chrono>
#include <functional>

#include "engine/token_logprobs.h"
#include "sched/scheduler.h"
#include "sched/prefill_grant.h"
#include "sched/reply_emitter.h"
#include "sched/scheduler_types.h"
#include "util/log.h"
#include "util/parallel.h"

namespace agentkv::sched {
void Scheduler::Loop() {
  ForbidFileAccessOnThisThread(true);  // this thread never waits on the disk
  // This thread decodes: its compute team gets a CPU per thread before the
  // first decode (engine/compute_team.h says why).
  ctx_.BindComputeThreadsToCpus();
  {
    // The bulk-copy workers of restores and exports (util/parallel.h) now,
    // not in the first restore after a start.
    const std::function<void(size_t)> nothing = [](size_t) {};
    WorkerTeam& team = WorkerTeam::ForThisThread();
    team.Launch(static_cast<size_t>(std::max(1, ctx_.n_threads())), &nothing);
    team.Wait();
  }
  for (;;) {
    // Sleep only when there is nothing to compute; a waiting request is
    // re-checked periodically (its agent may become free, its deadline pass).
    if (!inbox_.Wait(std::chrono::milliseconds(waiting_.empty() ? 1000 : 5), !active_.empty(), waiting_.entries())) break;
    const Clock::time_point iteration_start = Clock::now();
    last_decode_ms_ = -1;
    waiting_.OrderByArrival();
    RunTasks();
    for (auto& a : active_) {
      if (!a->done && a->w->req.cancel.cancelled() && SettlePipelined(*a)) Finish(*a, api::FinishReason::kCancelled);
    }
    Admit();
    // Before the step, whose replies a client may answer with a look at
    // /metrics: a namespace merged by this Admit (or a task) never shows.
    if (table_.bytes() > table_.budget_bytes()) {  // drops disk-only agents no waiting request is for
      tiers_.TrimTable(waiting_.Keys());
    }
    if (!active_.empty() && !StepRestoring()) {
      Status s = Step();
      if (!s.ok()) AKV_LOG_ERROR("decode step failed: %s", s.ToString().c_str());
    }
    active_.erase(std::remove_if(active_.begin(), active_.end(), [](const auto& a) { return a->done; }),
                  active_.end());
    n_active_ = active_.size();
    if (active_.empty() && waiting_.empty()) tiers_.RefillReadReserveWhenIdle();
    slots_.UpdateGauges();
    if (last_decode_ms_ >= 0) {
      metrics_.ObserveStep(last_decode_ms_,
                           std::chrono::duration<double, std::milli>(Clock::now() - iteration_start).count());
    }
  }
  // Shutdown: queued requests are refused, active ones end with what they
  // computed (committed and saved).
  RunTasks();
  waiting_.FailAll(Status::Unavailable("server shutting down"));
  n_waiting_ = 0;
  for (auto& a : active_) {
    if (!a->done && SettlePipelined(*a)) Finish(*a, api::FinishReason::kCancelled);
  }
  active_.clear();
}

Status Scheduler::Step() {
  // Turns whose pipelined restore still runs are StepRestoring's: never fed here.
  std::vector<engine::BatchItem> items;
  const int n_batch = ctx_.options().n_batch;
  std::vector<Active*> decoders, prefillers;
  for (auto& up : active_) {
    Active& a = *up;
    a.batch_row = -1;
    a.batch_fed = 0;
    if (a.done || !a.decoding) continue;  // (a restoring turn is not decoding yet)
    a.batch_row = static_cast<int>(items.size());
    items.push_back({a.slot, a.next_token, static_cast<int32_t>(a.agent->seq.tokens.size()), true});
    decoders.push_back(&a);
  }
  // The prefill budget, shortest remaining prompt first (GrantPrefill); batch rows in admission order.
  std::vector<Active*> order;
  std::vector<size_t> remaining;
  for (auto& up : active_) {
    if (up->done || up->decoding || up->restore) continue;
    order.push_back(up.get());
    remaining.push_back(up->pending.size() - up->n_fed);
  }
  const std::vector<size_t> grant =
      GrantPrefill(remaining, std::min(options_.prefill_chunk, n_batch - static_cast<int>(items.size())));
  for (size_t i = 0; i < order.size(); ++i) {
    if (grant[i] == 0) continue;
    AppendPrefill(*order[i], grant[i], &items);
    prefillers.push_back(order[i]);
  }
  if (items.empty()) return Status::OK();
  metrics_.ObserveBatch(static_cast<uint32_t>(decoders.size()), static_cast<uint32_t>(items.size() - decoders.size()));
  const Clock::time_point decode_start = Clock::now();
  Status s = ctx_.Decode(items);
  last_decode_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - decode_start).count();
  if (!s.ok()) {
    for (Active* a : decoders) FailActive(*a, s);
    for (Active* a : prefillers) FailActive(*a, s);
    return s;
  }
  if (prefillers.empty()) {
    uint64_t context_tokens = 0;
    for (const Active* a : decoders) context_tokens += a->agent->seq.tokens.size();
    metrics_.ObserveDecodeOnlyPass(last_decode_ms_, context_tokens);
  }
  // The fed tokens are now in the KV: record them in the agents' sequences.
  for (Active* a : decoders) {
    CachedSequence& seq = a->agent->seq;
    const std::string piece = tokenizer_.Piece(a->next_token);
    const auto begin = static_cast<uint32_t>(seq.text.size());
    seq.text += piece;
    seq.tokens.push_back(a->next_token);
    seq.spans.push_back({begin, static_cast<uint32_t>(seq.text.size())});
    SampleNext(*a);
  }
  for (Active* a : prefillers) RecordPrefill(*a);
  return Status::OK();
}

void Scheduler::AppendPrefill(Active& a, size_t take, std::vector<engine::BatchItem>* items) {
  const int32_t pos0 = static_cast<int32_t>(a.agent->seq.tokens.size());
  for (size_t i = 0; i < take; ++i) {
    const bool last = a.n_fed + i + 1 == a.pending.size();
    if (last) a.batch_row = static_cast<int>(items->size());
    items->push_back({a.slot, a.pending[a.n_fed + i], pos0 + static_cast<int32_t>(i), last});
  }
  a.batch_fed = take;
}

void Scheduler::RecordPrefill(Active& a) {
  CachedSequence& seq = a.agent->seq;
  for (size_t i = 0; i < a.batch_fed; ++i) {
    seq.tokens.push_back(a.pending[a.n_fed + i]);
    seq.spans.push_back(a.pending_spans[a.n_fed + i]);
  }
  a.n_fed += a.batch_fed;
  if (a.n_fed == a.pending.size()) {
    a.decoding = true;
    SampleNext(a);
  }
}

void Scheduler::SampleNext(Active& a) {
  // A failed pick (the request's grammar over its budget or bounds,
  // engine/sampler.h) ends this turn only.
  const std::span<const float> logits = ctx_.Logits(a.batch_row);
  Result<int32_t> token = a.sampler->Sample(logits);
  if (!token.ok()) {
    FailActive(a, token.status());
    return;
  }
  if (a.w->req.sampling.top_logprobs >= 0 && !tokenizer_.IsEndOfGeneration(token.value())) {
    a.w->sink->OnLogprob(LogprobOf(logits, token.value(), a.w->req.sampling.top_logprobs));
  }
  OnTokenSampled(a, token.value());
}

api::TokenLogprob Scheduler::LogprobOf(std::span<const float> logits, int32_t token, int32_t k) const {
  const engine::TokenLogprobs lp = engine::ComputeTokenLogprobs(logits, token, k);
  api::TokenLogprob out{tokenizer_.Piece(token), lp.logprob, {}};
  for (const auto& [id, logprob] : lp.top) out.top.push_back({tokenizer_.Piece(id), logprob});
  return out;
}

void Scheduler::OnTokenSampled(Active& a, int32_t token) {
  if (a.n_generated == 0) {
    a.usage.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - a.w->received).count();
    metrics_.ObserveTtft(api::CacheStateName(a.usage.cache_state), a.usage.ttft_ms);
  }
  if (tokenizer_.IsEndOfGeneration(token)) {
    Finish(a, api::FinishReason::kStop);
    return;
  }
  ++a.n_generated;
  if (a.reply->Append(tokenizer_.Piece(token))) {  // a stop string ends the reply
    a.usage.stop_sequence = a.reply->stop_sequence();
    Finish(a, api::FinishReason::kStop);
    return;
  }
  if (a.n_generated >= a.max_tokens ||
      static_cast<int64_t>(a.agent->seq.tokens.size()) + 1 >= ctx_.options().slot_ctx) {
    Finish(a, api::FinishReason::kLength);
    return;
  }
  a.next_token = token;
}

void Scheduler::Finish(Active& a, api::FinishReason reason) {
  assert(!a.restore);
  if (a.done) return;
  a.done = true;
  reason = a.reply->Finish(reason);
  a.usage.completion_tokens = a.n_generated;
  metrics_.AddTokens(0, 0, static_cast<uint64_t>(a.n_generated));
  metrics_.CountRequest(reason == api::FinishReason::kCancelled ? "cancelled" : "ok");
  Agent& agent = *a.agent;
  agent.busy = false;
  // The reply goes out first: the commit (export, pool, queued save) is the
  // server's business and must not hold up the client.
  a.w->sink->OnFinish(reason, a.usage);
  tiers_.CommitTurn(agent, ctx_, a.restored_blocks, a.shared_from);
  table_.Reindex(agent);
}

void Scheduler::FailActive(Active& a, const Status& s) {
  assert(!a.restore);
  if (a.done) return;
  a.done = true;
  metrics_.CountRequest("error");
  Agent& agent = *a.agent;
  agent.busy = false;
  // The slot's contents are unknown after a failed decode: drop it; the
  // agent's last committed cache (pool/disk) is still intact.
  ctx_.ClearSlot(a.slot);
  slots_.Set(a.slot, nullptr);
  agent.seq = std::move(a.committed_seq);
  table_.Reindex(agent);
  a.w->sink->OnError(s);
}

}  // namespace agentkv::sched
