// Scheduler: threads, queues and the public (any-thread) entry points.
// The inference loop's per-iteration work is in scheduler_step.cc, turn
// preparation and commit in scheduler_turn.cc.
#include "sched/scheduler.h"

#include <future>

#include "sched/scheduler_types.h"
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv::sched {

Scheduler::Scheduler(engine::Model& model, engine::Context& ctx, BlockPool& pool, AgentStore* store,
                     SchedulerOptions options)
    : model_(model), ctx_(ctx), tokenizer_(model), pool_(pool), store_(store), options_(std::move(options)),
      slot_owner_(static_cast<size_t>(ctx.options().n_slots), nullptr) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  running_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  running_ = false;
  reads_.Flush();
  saves_.Flush();
}

// Client text (message contents, a completion prompt) is marked plain: a
// "<|im_start|>" or "</s>" in it is text, never a special token.
engine::RenderedPrompt Scheduler::RenderPrompt(const api::GenerationRequest& r) const {
  if (r.kind == api::RequestKind::kCompletion) return engine::Tokenizer::RenderPlain(r.prompt);
  std::vector<engine::ChatMessage> msgs;
  msgs.reserve(r.messages.size());
  for (const auto& m : r.messages) {
    const char* role = m.role == api::Role::kSystem ? "system" : m.role == api::Role::kUser ? "user" : "assistant";
    msgs.push_back({role, m.content});
  }
  return tokenizer_.RenderChat(msgs);
}

int64_t Scheduler::MaxPromptBytes() const {
  return ContextTokens() * static_cast<int64_t>(tokenizer_.MaxTokenBytes());
}

int64_t Scheduler::CountPromptTokens(const api::GenerationRequest& request) const {
  const engine::RenderedPrompt prompt = RenderPrompt(request);
  return static_cast<int64_t>(tokenizer_.Tokenize(prompt.text, true, prompt.plain).tokens.size());
}

Status Scheduler::Submit(api::GenerationRequest request, std::shared_ptr<api::GenerationSink> sink) {
  if (!running_) return Status::Unavailable("submit: the server is not ready");
  if (!request.agent_id.empty()) {
    AGENTKV_RETURN_IF_ERROR(ValidateName("agent id", request.agent_id));
  }
  AGENTKV_RETURN_IF_ERROR(ValidateName("namespace", request.namespace_id));
  auto w = std::make_unique<Waiting>();
  w->received = request.received != Clock::time_point{} ? request.received : Clock::now();
  // Rendered and tokenized here, on the caller's thread, not on the
  // inference thread; the tokens live in the request and die with it.
  engine::RenderedPrompt prompt = RenderPrompt(request);
  w->fresh = tokenizer_.Tokenize(prompt.text, true, prompt.plain);
  w->prompt = std::move(prompt.text);
  const int64_t n_prompt = static_cast<int64_t>(w->fresh.tokens.size());
  if (n_prompt >= ContextTokens()) {
    return Status::OutOfRange("The prompt is " + std::to_string(n_prompt) + " tokens; the context holds " +
                              std::to_string(ContextTokens()) + " tokens including the reply.");
  }
  w->req = std::move(request);
  w->sink = std::move(sink);
  const AgentKey key{w->req.namespace_id, w->req.agent_id};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status::Unavailable("submit: shutting down");
    if (n_waiting_.load() >= options_.max_queue) {
      return Status::ResourceExhausted("submit: queue full (" + std::to_string(options_.max_queue) + " waiting)");
    }
    // An agent that may be on disk: start reading now, overlapping other
    // agents' compute (admission waits for the read).
    if (!key.agent_id.empty() && !resident_keys_.count(key) && !pool_.Contains(key)) PostAgentRead(key);
    incoming_.push_back(std::move(w));
    ++n_waiting_;  // submitted, not yet admitted or refused
  }
  cv_.notify_all();
  return Status::OK();
}

void Scheduler::RunOnLoop(std::function<void()> task) {
  if (!running_) {
    task();  // no inference thread: the caller is the only user
    return;
  }
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back([task = std::move(task), done] {
      task();
      done->set_value();
    });
  }
  cv_.notify_all();
  fut.wait();
}

void Scheduler::RunTasks() {
  std::deque<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.swap(tasks_);
  }
  for (auto& t : tasks) t();
}

// Admin calls: the store work (reading a namespace's index, disk sizes,
// erasure) runs on the calling thread; only table and slot work runs on the
// inference thread.

Result<std::vector<api::AgentInfo>> Scheduler::ListAgents(const std::string& ns) {
  ReadNamespaceIndex(ns);
  std::vector<api::AgentInfo> out;
  RunOnLoop([&] {
    MergeNamespaceIndex(ns);
    for (const auto& [key, agent] : agents_) {
      if (key.ns == ns) out.push_back(InfoOf(*agent));
    }
  });
  for (auto& info : out) FillDiskBytes(ns, &info);
  return out;
}

Result<api::AgentInfo> Scheduler::GetAgent(const std::string& ns, const std::string& agent_id) {
  ReadNamespaceIndex(ns);
  Result<api::AgentInfo> out = Status::NotFound("agent '" + agent_id + "' not found");
  RunOnLoop([&] {
    MergeNamespaceIndex(ns);
    if (Agent* a = FindAgent({ns, agent_id})) out = InfoOf(*a);
  });
  if (out.ok()) FillDiskBytes(ns, &*out);
  return out;
}

Status Scheduler::DeleteAgent(const std::string& ns, const std::string& agent_id, bool evict_only) {
  AGENTKV_RETURN_IF_ERROR(ValidateName("agent id", agent_id));
  ReadNamespaceIndex(ns);
  const AgentKey key{ns, agent_id};
  Status result;
  bool erase_disk = false;
  RunOnLoop([&] {
    MergeNamespaceIndex(ns);
    Agent* a = FindAgent(key);
    if (a == nullptr) {
      result = Status::NotFound("agent '" + agent_id + "' not found");
      return;
    }
    if (a->busy) {
      result = Status::FailedPrecondition("agent '" + agent_id + "' has a request in flight");
      return;
    }
    if (a->slot >= 0) {
      ctx_.ClearSlot(a->slot);
      SetSlotOwner(a->slot, nullptr);
    }
    if (evict_only) return;
    (void)pool_.Erase(key);
    erase_disk = a->on_disk;
    {
      std::lock_guard<std::mutex> lock(mu_);
      deleting_.insert(key);  // no read may bring it back while its files go
      unsaved_.erase(key);
      agent_reads_.erase(key);
    }
    agents_.erase(key);
  });
  if (!result.ok()) return result;
  WaitForSaves(key);  // its queued saves land before it is evicted or erased
  if (evict_only) return pool_.Contains(key) ? pool_.EvictToDisk(key) : Status::OK();
  if (erase_disk && store_ != nullptr) result = store_->DeleteAgent(ns, agent_id);
  if (result.code() == StatusCode::kNotFound) result = Status::OK();
  std::lock_guard<std::mutex> lock(mu_);
  deleting_.erase(key);
  agent_reads_.erase(key);
  return result;
}

void Scheduler::OnPoolEviction(const EvictionEvent& event) {
  if (event.status.ok()) {
    metrics_.CountEviction("pool");
  } else {
    AKV_LOG_WARN("could not persist agent %s before eviction: %s", event.agent.agent_id.c_str(),
                 event.status.ToString().c_str());
  }
}

std::string Scheduler::MetricsText() const {
  SchedulerMetrics::Gauges g;
  g.queue_length = n_waiting_.load();
  g.active_requests = n_active_.load();
  g.io_pending = reads_.Pending() + saves_.Pending();
  {
    std::lock_guard<std::mutex> lock(mu_);
    g.unsaved_agents = unsaved_.size();
  }
  const auto ps = pool_.Stats();
  g.hot_agents = ps.n_agents;
  g.hot_bytes = ps.used_bytes;
  g.hot_budget_bytes = ps.budget_bytes;
  g.resident_agents = resident_agents_.load();
  g.resident_bytes = resident_tokens_.load() * ctx_.spec().BytesPerToken(ctx_.spec().type_k, ctx_.spec().type_v);
  if (store_ != nullptr) {
    const auto ss = store_->stats();
    g.warm_agents = ss.agents;
    g.warm_bytes = ss.disk_bytes;
    g.disk_out_of_space = ss.saves_out_of_space;
    g.disk_evictions_no_space = ss.agents_evicted_for_space;
    g.disk_evictions_budget = ss.agents_evicted - ss.agents_evicted_for_space;
  }
  return metrics_.Render(g);
}

}  // namespace agentkv::sched
