#pragma once
// Scheduler: the one inference thread that owns the llama context, and the
// api::Backend the HTTP layer talks to.
//
// Each iteration (DESIGN §7) builds one batch: one decode token for every
// active request in its decode phase, plus prefill chunks of waiting prompts
// (FIFO, up to prefill_chunk tokens), so a long prefill never stalls other
// agents' streams for more than one chunk. New requests are admitted at any
// iteration. Agents live in tiers: resident (in a slot), hot (RAM pool),
// warm (disk), remote (RemoteTier, shared by servers); a returning agent is
// restored from the best tier and its new
// prompt is matched at character level against its cached text.
//
// Threads and I/O (docs/architecture.md): the inference thread owns llama,
// the slots and the agent table, and never touches the disk (it marks itself
// with ForbidFileAccessOnThisThread; tests check the count stays 0). Every
// store call runs in AgentTiers (sched/agent_tiers.h): reads, saves, the
// remote tier, unsaved turns; a request whose agent is being read waits in
// the queue while other agents compute.
//
// Thread safety: Submit, the admin calls and MetricsText may be called from
// any thread; they talk to the inference thread through a mutex-protected
// queue (admin calls wait for the thread to run them). The RAM pool and the
// store are internally synchronized.
//
// Per-agent serialization: a request for an agent that is busy waits in the
// queue (FIFO per agent) until the earlier one finishes or its deadline
// passes (then 409 FailedPrecondition). Across tenants (namespaces) waiting
// requests are tried round-robin, not FIFO (TenantRoundRobin).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/backend.h"
#include "engine/chat_format.h"
#include "engine/context.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/tokenizer.h"
#include "kv/block_pool.h"
#include "prefix/prefix_index.h"
#include "sched/agent_admin.h"
#include "sched/agent_tiers.h"
#include "sched/metrics.h"
#include "sched/pipelined_restore.h"
#include "sched/prefix_donor.h"
#include "sched/scheduler_options.h"
#include "sched/slot_owners.h"
#include "sched/loop_inbox.h"
#include "sched/turn_plan.h"
#include "sched/turn_prompter.h"
#include "sched/waiting_queue.h"
#include "remote/remote_tier.h"
#include "store/agent_store.h"
#include "util/mutex.h"

namespace agentkv::sched {
struct RestoreSource;  // sched/turn_restore.h

class Scheduler : public api::Backend {
 public:
  // Not owned; all must outlive the scheduler. `store` may be null (no disk tier).
  Scheduler(engine::Model& model, engine::Context& ctx, BlockPool& pool, AgentStore* store,
            SchedulerOptions options);
  ~Scheduler() override;  // Stop()

  // Starts the inference thread.
  void Start();
  // Returns once the read landing's memory is reserved (options'
  // read_landing_reserve; at once without a landing). Any thread.
  void WaitReadLandingReserved() const { tiers_.WaitLandingReserved(); }
  // Stops admitting, cancels waiting and active requests (active ones finish
  // with what they computed, which is saved), flushes pending saves, joins.
  void Stop();

  // api::Backend
  std::string ModelId() const override { return options_.model_id; }
  // "fp_" + the first 16 hex digits of the cache spec's output fingerprint
  // (model weights and metadata, KV types at rest and, when they differ, in
  // the slots, engine layout version).
  std::string SystemFingerprint() const override { return "fp_" + ctx_.spec().OutputFingerprint().substr(0, 16); }
  bool IsReady() const override { return running_.load(); }
  int64_t ContextTokens() const override { return ctx_.options().slot_ctx; }
  int64_t MaxPromptBytes() const override;
  // Submit tokenizes the prompt on the calling thread and refuses one of
  // ContextTokens() tokens or more with OutOfRange carrying the quantity
  // {prompt tokens, ContextTokens()} (-> 400 context_length_exceeded).
  Status Submit(api::GenerationRequest request, std::shared_ptr<api::GenerationSink> sink) override;
  // The admin calls (AgentAdmin): any thread but the inference thread.
  Result<std::vector<api::AgentInfo>> ListAgents(const std::string& ns) override { return admin_.List(ns); }
  Result<api::AgentInfo> GetAgent(const std::string& ns, const std::string& agent_id) override {
    return admin_.Get(ns, agent_id);
  }
  Status DeleteAgent(const std::string& ns, const std::string& agent_id, bool evict_only) override {
    return admin_.Delete(ns, agent_id, evict_only);
  }
  std::string MetricsText() const override;

  // Tokens of the request's prompt after the template, as Submit counts them
  // (tests); 0 when the request cannot be rendered (Submit refuses it). Any thread.
  int64_t CountPromptTokens(const api::GenerationRequest& request) const { return prompter_.CountTokens(request); }

  // The RAM pool's eviction observer: counts evictions.
  void OnPoolEviction(const EvictionEvent& event);

  // Blocks until every save posted so far is on disk, and pushed to the remote
  // tier if there is one (tests, shutdown).
  void FlushSaves() { tiers_.FlushSaves(); }
  // Blocks until every save of this agent posted so far has run (landed or
  // failed); other agents' saves are not waited for. Any thread but the
  // inference thread.
  void WaitForSaves(const AgentKey& key) { tiers_.WaitForSaves(key); }

 private:
  struct Active;
  using Waiting = WaitingTurn;

  // Inference thread.
  void Loop();
  void RunTasks();
  void Admit();
  bool TryAdmit(Waiting& w);                                  // false: keep waiting
  // After a request for `key` ended before its turn began: erases the agent
  // if it is a fork (of a subagent's parent, or an implicit DIVERGE) that
  // never ran and no other waiting request is for it, so that no phantom
  // holding its source's sequence stays in the table (issue 29).
  void DropUnstartedFork(const AgentKey& key);
  // Picks the tier to restore `agent` from. False: its blocks must first be
  // read from disk (a read is posted); the request keeps waiting.
  bool FindRestoreSource(Agent& agent, RestoreSource* source);
  // Prefix donors (scheduler_share.cc, sched/prefix_donor.h), for an agent
  // that is not a fork and a request that is not isolated: kIdle sets the
  // agent up as a fork of the idle donor (FindRestoreSource then finds its
  // blocks); kLeader fills `source` (a copy from the leader's slot);
  // kWaitForLeader: keep waiting; kNone: nothing to share (or the agent's
  // own cache shares as much). A returning agent seeded gives up its own
  // sequence (kept in w.own_before_seed) and its slot.
  DonorChoice::Kind SeedFromDonor(Waiting& w, Agent& agent, RestoreSource* source);
  Status Prepare(Waiting& w, Agent& agent, int slot, Active* a, RestoreSource source);
  // Pipelined restores (scheduler_pipelined.cc, sched/pipelined_restore.h).
  // A source for `agent` from its read still in flight into `landing` (may
  // be null); false if that read cannot be restored while it runs.
  bool PipelinedSource(const AgentKey& from, const std::shared_ptr<ReadLanding::Ticket>& landing,
                       const Agent& agent, RestoreSource* source);
  // The restoring phase of an iteration, before Step: a turn whose restore
  // still runs decodes its first chunk, each layer imported as its rows
  // land, when it is alone (StepPipelined), else sits out, copying in the
  // layers that landed. True if that was this iteration's step.
  bool StepRestoring();
  // False when it sat this step out. Never waits for the read (only, alone
  // and with nothing else to run, for its rows and its last checks, giving
  // way to requests, tasks, the stop and its cancellation).
  bool StepPipelined(Active& a, bool alone);
  // Whether every layer is in and the read verified what was imported (then
  // the turn goes on from it), else the caller restarts the turn cold
  // (RestartCold). REQUIRES its read done: waits for nothing.
  bool ResolvePipelined(Active& a);
  void RestartCold(Active& a);
  // Gives a's restore up without waiting for its read
  // (PipelinedRestore::Abandon); the caller clears a.slot (FailActive),
  // which is then free.
  void AbandonPipelined(Active& a);
  // A turn ending (cancelled, shut down) while its restore runs: true if its
  // read completed and verified every layer by now (it then finishes as any
  // other turn; also true without a restore), else its restore is abandoned
  // and the turn failed as cancelled.
  bool SettlePipelined(Active& a);
  Status Step();                                              // one batch
  // Adds a's next `take` pending tokens to a batch (a.batch_fed, and
  // a.batch_row when the last one is among them); after the decode,
  // RecordPrefill records them, the last one's logits giving its first token.
  void AppendPrefill(Active& a, size_t take, std::vector<engine::BatchItem>* items);
  void RecordPrefill(Active& a);
  // Samples a's next token from its batch row; a failed pick fails the turn.
  void SampleNext(Active& a);
  // The sampled token's logprob and the k best alternatives (api::TokenLogprob).
  api::TokenLogprob LogprobOf(std::span<const float> logits, int32_t token, int32_t k) const;
  void OnTokenSampled(Active& a, int32_t token);
  // End a turn: Finish commits it, FailActive restores the agent's last
  // committed sequence and drops the slot. REQUIRES no restore in flight
  // (SettlePipelined, or AbandonPipelined, first).
  void Finish(Active& a, api::FinishReason reason);
  void FailActive(Active& a, const Status& s);
  void WakeLoopForRead() { inbox_.Wake(); }  // a read completed: admission may proceed (any thread)
  void RunOnLoop(std::function<void()> task);                // from other threads: run and wait

  engine::Context& ctx_;
  engine::Tokenizer tokenizer_;
  BlockPool& pool_;
  const SchedulerOptions options_;
  SchedulerMetrics metrics_;
  TurnPrompter prompter_;  // on the submitting threads (uses tiers_, constructed after it)

  // Shared with other threads.
  LoopInbox<Waiting> inbox_;  // requests, tasks, wake-ups and the stop, for the loop
  std::atomic<bool> running_{false};
  std::atomic<size_t> n_waiting_{0}, n_active_{0};
  // Start and Stop run under it whole (Stop joins under it: the loop never
  // takes it), so concurrent Stops return once the scheduler has stopped.
  Mutex lifecycle_mu_;
  std::thread thread_ GUARDED_BY(lifecycle_mu_);

  // Inference thread only.
  WaitingQueue waiting_;                              // requests waiting for admission
  std::vector<std::unique_ptr<Active>> active_;
  SlotOwners slots_;                                  // who holds each slot (IsResident: any thread)
  double last_decode_ms_ = -1;                        // this iteration's forward pass (Step), -1: none

  // SchedulerOptions::pipelined_restore, where possible (PipelinedPossible).
  const bool pipelined_;
  // Last: destroyed first (its executors' jobs use the state above).
  AgentTiers tiers_;
  AgentTable& table_;  // tiers_'s (inference thread)
  AgentAdmin admin_;
};

}  // namespace agentkv::sched
