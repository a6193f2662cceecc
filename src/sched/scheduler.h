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
#include "sched/agent_tiers.h"
#include "sched/metrics.h"
#include "sched/prefix_donor.h"
#include "sched/tenant_round_robin.h"
#include "sched/turn_plan.h"
#include "remote/remote_tier.h"
#include "store/agent_store.h"

namespace agentkv::sched {

struct SchedulerOptions {
  std::string model_id;             // name clients send as "model"
  int prefill_chunk = 512;          // max prefill tokens per iteration
  size_t max_queue = 64;            // waiting requests beyond this -> 429
  int64_t queue_timeout_ms = 120000;  // a request waiting longer -> error
  int default_max_tokens = 256;     // when the request sets none
  double diverge_ratio = 0.5;
  // The remote tier below the disk (docs/remote.md); not owned, must outlive
  // the scheduler; null: none. Used only with a store.
  RemoteTier* remote = nullptr;
  // Agents' last prompts kept for incremental tokenization (PromptTokenCache).
  size_t prompt_token_cache_bytes = size_t{64} << 20;
  // The agent table (texts, tokens and spans of every agent known here, plus
  // the implicit-lookup index): above this many bytes, the least recently used
  // agents whose cache lives only on disk (not in a slot, the RAM pool or an
  // unsaved turn) are dropped from it; their next turn reads them back from
  // their manifest. Agents in a slot or in RAM are never dropped, so the table
  // may exceed this by their metadata (bounded by the slots and --cache-ram).
  size_t agent_table_bytes = size_t{256} << 20;
  // Requests that set no reasoning_format get this one (--reasoning-format).
  api::ReasoningFormat reasoning_format = api::ReasoningFormat::kAuto;
  // Jinja chat template used instead of the model's (--chat-template-file);
  // empty: the model's. Check it with engine::ChatFormat::CheckTemplate.
  std::string chat_template;
  // A disk read of an agent lands its blocks' rows in llama.cpp's state
  // layout while it reads (sched/read_landing.h), at the cost of a second
  // slot-sized state buffer (page-locked on a GPU: e.g. 1.2 GB for an
  // 8B-shape slot of 32K tokens). Unset: on when the context's staging
  // buffer is page-locked (a model on a GPU), where the restore's host-side
  // copy is what the inference thread would otherwise add after the read.
  std::optional<bool> read_landing;
  // Start() faults in one slot's worth of block tensors (the sizes of
  // engine::BlockTensorSizes at slot_ctx positions) on the read threads, held
  // in the process's WarmMemory reserve (util/warm_memory.h) and refilled by
  // freed blocks and when the server is idle (RefillReadReserveWhenIdle): a
  // disk read's tensors then do not fault page by page inside the read. Costs that memory while idle (8B shape: 302 MB at an 8K slot,
  // 1.2 GB at 32K) and the start-up time to fault it in. Unset: on.
  std::optional<bool> read_reserve;
  // A returning agent's restore and first decode run while its blocks are
  // still being read (sched/scheduler_pipelined.cc): once its read is planned
  // (an agent the table knows) or its manifest is in (one it does not, e.g.
  // after a restart), the agent is admitted, llama.cpp imports the read landing's state as
  // it fills (engine/layer_gated_import.h) and the first decode computes each
  // layer as soon as that layer's rows are in; the turn uses the result only
  // if the read then verified every block, else it prefills cold. Only while
  // that agent is the only one running (others are never held up by its
  // read; a request that arrives meanwhile makes it yield and restore the
  // usual way). Turns the read landing on. Unset: on where the context
  // stages through pinned memory (a GPU), off on CPU, where the read is not
  // the restore's bottleneck (bench/RESULTS.md, stops 14 and 15).
  std::optional<bool> pipelined_restore;
};

class Scheduler : public api::Backend {
 public:
  // Not owned; all must outlive the scheduler. `store` may be null (no disk tier).
  Scheduler(engine::Model& model, engine::Context& ctx, BlockPool& pool, AgentStore* store,
            SchedulerOptions options);
  ~Scheduler() override;  // Stop()

  // Starts the inference thread.
  void Start();
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
  Result<std::vector<api::AgentInfo>> ListAgents(const std::string& namespace_id) override;
  Result<api::AgentInfo> GetAgent(const std::string& namespace_id, const std::string& agent_id) override;
  Status DeleteAgent(const std::string& namespace_id, const std::string& agent_id, bool evict_only) override;
  std::string MetricsText() const override;

  // Tokens of the request's prompt after the template, as Submit counts them
  // (tests); 0 when the request cannot be rendered (Submit refuses it). Any thread.
  int64_t CountPromptTokens(const api::GenerationRequest& request) const;

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
  struct Waiting;

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
  struct RestoreSource;
  // Picks the tier to restore `agent` from. False: its blocks must first be
  // read from disk (a read is posted); the request keeps waiting.
  bool FindRestoreSource(Agent& agent, RestoreSource* source);
  // Prefix donors (scheduler_share.cc, sched/prefix_donor.h), for an agent
  // with no cache of its own and a request that is not isolated: kIdle sets
  // the agent up as a fork of the idle donor (FindRestoreSource then finds
  // its blocks); kLeader fills `source` (a copy from the leader's slot);
  // kWaitForLeader: keep waiting; kNone: nothing to share.
  DonorChoice::Kind SeedFromDonor(Waiting& w, Agent& agent, RestoreSource* source);
  Status Prepare(Waiting& w, Agent& agent, int slot, Active* a, RestoreSource source);
  // Restores positions [0, n_keep) of `blocks` into `slot` (cleared first):
  // from `landing`'s state when the blocks all landed there, else from the blocks.
  Status ImportRestored(int slot, const std::vector<PoolBlock>& blocks, uint32_t n_keep,
                        const ReadLanding::Ticket* landing);
  // Pipelined restores (scheduler_pipelined.cc), inference thread. A source
  // for `agent` from its read still in flight into `landing` (may be null);
  // false if that read cannot be restored while it runs.
  bool PipelinedSource(const AgentKey& from, const std::shared_ptr<ReadLanding::Ticket>& landing,
                       const Agent& agent, RestoreSource* source);
  // Starts importing the source's landing into `slot`, positions [0, n_keep).
  Status StartPipelinedRestore(Active& a, int slot, uint32_t n_keep, const RestoreSource& source);
  // Step() for an active whose import still runs: its first chunk decoded
  // beside the import when it is alone; false when it sat this step out.
  // Never waits for the read (only, alone and with nothing else to run, for
  // its last checks: WaitPipelinedRead).
  bool StepPipelined(Active& a, bool alone, Status* decoded);
  // Whether a's pipelined read has completed (or was dropped). No wait.
  bool PipelinedReadDone(const Active& a);
  // Waits for a's pipelined read to complete while no request is waiting, a
  // is not cancelled and the loop is not stopping; false if one of those
  // came first.
  bool WaitPipelinedRead(const Active& a);
  // Whether the read verified what was imported (then the turn goes on from
  // it), else the caller restarts the turn cold (RestartCold). REQUIRES the
  // import ended or has every row in, and PipelinedReadDone: it waits for nothing.
  bool ResolvePipelined(Active& a);
  void RestartCold(Active& a);
  // Gives up a's pipelined restore without waiting for its read (a turn
  // cancelled, failed or shut down): the landing is abandoned (the import's
  // waits for rows end, the read copies no more), the read's entry dropped
  // (its result is discarded when it comes), and the import kept in
  // abandoned_imports_ with its slot until it ended. After it a has no
  // import, and a.slot must be neither cleared nor reused (SlotDraining).
  void AbandonPipelined(Active& a);
  // Whether `slot` still receives an abandoned import's rows: no one's, and
  // not handed out (AcquireSlot) until ReapAbandonedImports cleared it.
  bool SlotDraining(int slot) const;
  // Clears and frees the slots of abandoned imports that ended; `wait`
  // (shutdown): of all of them, joining each (it waits for no read).
  void ReapAbandonedImports(bool wait);
  int AcquireSlot(const Agent& for_agent);                    // -1 if none free/evictable
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
  void Finish(Active& a, api::FinishReason reason);
  void FailActive(Active& a, const Status& s);
  // Pool + async save. `restored`: the blocks the turn started from (already
  // exported; those still matching are not copied out of the slot again).
  // `shared_from`: the agent whose cache the turn started from (a fork, a
  // leader's slot); its pool blocks stand in for `restored` when that is empty.
  void CommitTurn(Agent& agent, const std::vector<PoolBlock>& restored, const std::optional<AgentKey>& shared_from);
  void SetSlotOwner(int slot, Agent* agent);
  void WakeLoopForRead();  // a read completed: admission may proceed (any thread)
  // The prompt, grammar and reply parser of a request (chat: ChatFormat;
  // completion: the raw prompt). InvalidArgument: see ChatFormat::Render.
  Result<engine::ChatPrompt> RenderPrompt(const api::GenerationRequest& r) const;
  // Sends generated reply text to the sink: as is, or through the reply
  // parser (content and tool-call deltas) when the request has one.
  void EmitText(Active& a, std::string_view text);
  // The prompt's tokens (with BOS), from the agent's previous prompt where
  // it can (AgentTiers::PreviousPrompt: the prompt cache, else the prompt
  // prefix of the manifest its in-flight read brings). `*entry`: this prompt
  // as a prompt-cache entry (null for an implicit agent), which admission
  // remembers under the agent that runs it (a side request's side agent,
  // not the agent it named: else the main agent's next prompt would be
  // tokenized from the side request's). Any thread.
  engine::TokenizedText TokenizePrompt(const AgentKey& key, const engine::RenderedPrompt& prompt,
                                       std::shared_ptr<const engine::PromptTokens>* entry);
  // The full tokenization, a long prompt in pieces on up to tokenize_pieces_
  // threads: it is on the path to a new agent's first token, and to a
  // returning agent's whose manifest records no prompt prefix.
  engine::TokenizedText TokenizeFull(const engine::RenderedPrompt& prompt) const;
  // A returning agent being read (after a restart, or gone from the prompt
  // cache): Submit waits this long for its read's manifest, which admission
  // waits for anyway, so that only what the new prompt adds is tokenized
  // instead of a full tokenization competing with the read for the cores (a
  // slow or stuck disk then costs the submitting thread that much).
  // Long enough for a short agent's read from a local disk (a 4K-token
  // agent: ~7 ms on the 2-core VM), short next to a long prompt's full
  // tokenization, which would otherwise compete with the read.
  static constexpr int kPromptReadWaitMs = 20;
  void RunOnLoop(std::function<void()> task);                // from other threads: run and wait

  engine::Model& model_;
  engine::Context& ctx_;
  engine::Tokenizer tokenizer_;
  std::unique_ptr<engine::ChatFormat> chat_format_;
  BlockPool& pool_;
  const SchedulerOptions options_;
  SchedulerMetrics metrics_;
  const int tokenize_pieces_;  // the compute threads' count, at most 8

  // Shared with other threads.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Waiting>> incoming_;     // GUARDED_BY(mu_)
  std::deque<std::function<void()>> tasks_;           // GUARDED_BY(mu_)
  bool stopping_ = false;                             // GUARDED_BY(mu_)
  std::atomic<bool> running_{false};
  std::atomic<size_t> n_waiting_{0}, n_active_{0};
  std::atomic<uint64_t> resident_agents_{0}, resident_tokens_{0};  // written by the inference thread
  bool read_completed_ = false;                        // GUARDED_BY(mu_): wakes the loop
  std::thread thread_;

  // Inference thread only.
  std::deque<std::unique_ptr<Waiting>> waiting_;
  TenantRoundRobin admission_order_;                  // which waiting request Admit tries first
  std::vector<std::unique_ptr<Active>> active_;
  std::vector<Agent*> slot_owner_;                    // per slot, null if free
  struct AbandonedImport;
  std::vector<AbandonedImport> abandoned_imports_;     // AbandonPipelined: imports still copying into their slot

  // SchedulerOptions::pipelined_restore, where possible (PipelinedPossible).
  const bool pipelined_;
  // Last: destroyed first (its executors' jobs use the state above).
  AgentTiers tiers_;
  AgentTable& table_;  // tiers_'s (inference thread)
};

}  // namespace agentkv::sched
