#pragma once
// Scheduler: the one inference thread that owns the llama context, and the
// api::Backend the HTTP layer talks to.
//
// Each iteration (DESIGN §7) builds one batch: one decode token for every
// active request in its decode phase, plus prefill chunks of waiting prompts
// (FIFO, up to prefill_chunk tokens), so a long prefill never stalls other
// agents' streams for more than one chunk. New requests are admitted at any
// iteration. Agents live in tiers: resident (in a slot), hot (RAM pool),
// warm (disk); a returning agent is restored from the best tier and its new
// prompt is matched at character level against its cached text.
//
// Thread safety: Submit, the admin calls and MetricsText may be called from
// any thread; they talk to the inference thread through a mutex-protected
// queue (admin calls wait for the thread to run them). All llama, slot and
// agent-table state is owned by the inference thread. The RAM pool and the
// store are internally synchronized (the I/O thread uses them too).
//
// Per-agent serialization: a request for an agent that is busy waits in the
// queue (FIFO per agent) until the earlier one finishes or its deadline
// passes (then 409 FailedPrecondition).

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/backend.h"
#include "engine/context.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/tokenizer.h"
#include "kv/block_pool.h"
#include "sched/io_executor.h"
#include "sched/metrics.h"
#include "sched/turn_plan.h"
#include "store/agent_store.h"

namespace agentkv::sched {

struct SchedulerOptions {
  std::string model_id;             // name clients send as "model"
  int prefill_chunk = 512;          // max prefill tokens per iteration
  size_t max_queue = 64;            // waiting requests beyond this -> 429
  int64_t queue_timeout_ms = 120000;  // a request waiting longer -> error
  int default_max_tokens = 256;     // when the request sets none
  double diverge_ratio = 0.5;
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
  bool IsReady() const override { return running_.load(); }
  int64_t ContextTokens() const override { return ctx_.options().slot_ctx; }
  Result<int64_t> CountPromptTokens(const api::GenerationRequest& request) const override;
  Status Submit(api::GenerationRequest request, std::shared_ptr<api::GenerationSink> sink) override;
  Result<std::vector<api::AgentInfo>> ListAgents(const std::string& namespace_id) override;
  Result<api::AgentInfo> GetAgent(const std::string& namespace_id, const std::string& agent_id) override;
  Status DeleteAgent(const std::string& namespace_id, const std::string& agent_id, bool evict_only) override;
  std::string MetricsText() const override;

  // The RAM pool's persist callback: writes the agent's last committed record
  // with these blocks to the store. Any thread.
  Status PersistAgent(const AgentKey& key, const std::vector<PoolBlock>& blocks);

  // The RAM pool's eviction observer: counts evictions and persist failures.
  void OnPoolEviction(const EvictionEvent& event);

  // Blocks until every save posted so far is on disk (tests, shutdown).
  void FlushSaves() { io_.Flush(); }

 private:
  struct Agent;
  struct Active;
  struct Waiting;

  // Inference thread.
  void Loop();
  void RunTasks();
  void Admit();
  bool TryAdmit(Waiting& w);                                  // false: keep waiting
  Status Prepare(Waiting& w, Agent& agent, int slot, Active* a);
  int AcquireSlot(const Agent& for_agent);                    // -1 if none free/evictable
  Status Step();                                              // one batch
  void OnTokenSampled(Active& a, int32_t token);
  void Finish(Active& a, api::FinishReason reason);
  void FailActive(Active& a, const Status& s);
  void CommitTurn(Agent& agent);                              // pool + async save
  Agent* FindAgent(const AgentKey& key);
  Agent& GetOrLoadAgent(const AgentKey& key);
  Result<std::string> ResolveImplicitAgent(const std::string& ns, const std::string& prompt);
  void LoadNamespaceIndex(const std::string& ns);
  std::string RenderPrompt(const api::GenerationRequest& r) const;
  api::AgentInfo InfoOf(const Agent& a) const;
  void RunOnLoop(std::function<void()> task);                // from other threads: run and wait

  engine::Model& model_;
  engine::Context& ctx_;
  engine::Tokenizer tokenizer_;
  BlockPool& pool_;
  AgentStore* store_;
  const SchedulerOptions options_;
  SchedulerMetrics metrics_;
  IoExecutor io_;

  // Shared with other threads.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Waiting>> incoming_;     // GUARDED_BY(mu_)
  std::deque<std::function<void()>> tasks_;           // GUARDED_BY(mu_)
  bool stopping_ = false;                             // GUARDED_BY(mu_)
  std::atomic<bool> running_{false};
  std::atomic<size_t> n_waiting_{0}, n_active_{0};
  std::atomic<uint64_t> resident_agents_{0}, resident_tokens_{0};  // written by the inference thread
  std::set<AgentKey> prefetching_;                    // GUARDED_BY(mu_)
  std::set<AgentKey> prefetched_;                     // GUARDED_BY(mu_): loaded from disk, not yet used
  // Records of agents as last committed, for PersistAgent (any thread).
  std::map<AgentKey, AgentRecord> committed_;         // GUARDED_BY(mu_)
  std::thread thread_;

  // Inference thread only.
  std::map<AgentKey, std::unique_ptr<Agent>> agents_;
  std::set<std::string> indexed_namespaces_;
  std::deque<std::unique_ptr<Waiting>> waiting_;
  std::vector<std::unique_ptr<Active>> active_;
  std::vector<Agent*> slot_owner_;                    // per slot, null if free
  uint64_t next_auto_id_ = 0;
};

}  // namespace agentkv::sched
