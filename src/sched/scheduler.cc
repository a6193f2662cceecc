// Scheduler: threads, queues and the public (any-thread) entry points.
// The inference loop's per-iteration work is in scheduler_step.cc, turn
// preparation and commit in scheduler_turn.cc.
#include "sched/scheduler.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "engine/layer_gated_import.h"
#include "sched/chat_request.h"
#include "sched/scheduler_types.h"
#include "sched/side_request.h"
#include "store/manifest.h"
#include "store/store_ids.h"
#include "util/log.h"
#include "util/warm_memory.h"

namespace agentkv::sched {

Scheduler::Scheduler(engine::Model& model, engine::Context& ctx, BlockPool& pool, AgentStore* store,
                     SchedulerOptions options)
    : model_(model), ctx_(ctx), tokenizer_(model), chat_format_(engine::ChatFormat::Create(model, tokenizer_, options.chat_template)),
      pool_(pool), store_(store), options_(std::move(options)), prompt_tokens_(options_.prompt_token_cache_bytes),
      tokenize_pieces_(std::clamp(ctx.n_threads(), 1, 8)),
      remote_(store != nullptr ? options_.remote : nullptr),
      slot_owner_(static_cast<size_t>(ctx.options().n_slots), nullptr) {
  pipelined_ = store_ != nullptr && options_.pipelined_restore.value_or(ctx.staging_pinned());
  if (pipelined_ && !engine::LayerGatedImport::Supports(ctx.spec().slot_shape)) {
    pipelined_ = false;  // a sliding-window model's two caches (the landing plans none of them either)
    if (options_.pipelined_restore.has_value()) {
      AKV_LOG_INFO("pipelined restore: off for this model (more than one KV cache: sliding window)");
    }
  }
  if (store_ != nullptr && (options_.read_landing.value_or(ctx.staging_pinned()) || pipelined_)) {
    const auto n_stream = static_cast<uint32_t>(ctx.options().n_slots);
    landing_ = std::make_unique<ReadLanding>(
        ctx.spec().layout(), n_stream,
        engine::MaxStateBytes(ctx.spec().slot_shape, static_cast<uint32_t>(ctx.options().slot_ctx), n_stream),
        ctx.staging_pinned());
  }
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (thread_.joinable()) return;
    stopping_ = false;
    running_ = true;
    thread_ = std::thread([this] { Loop(); });
  }
  if (store_ == nullptr) return;
  // The load threads now, not in the first returning agent's read; and the
  // reserve their reads' tensors come from, faulted in before the first
  // request (which would otherwise queue behind it on reads_).
  std::vector<std::pair<size_t, size_t>> reserve;
  if (options_.read_reserve.value_or(true)) {
    reserve = engine::BlockTensorSizes(ctx_.spec().shape, static_cast<uint32_t>(ctx_.options().slot_ctx));
  }
  std::promise<void> started;
  reads_.Post([this, &reserve, &started] {
    const auto fill_start = std::chrono::steady_clock::now();
    WarmMemory::Get().SetTargets(reserve);  // off: holds nothing
    store_->StartReadThreads(
        [](size_t reader, size_t n_readers) { WarmMemory::Get().FillShare(reader, n_readers); });
    if (!reserve.empty()) {
      AKV_LOG_INFO("read reserve: %.1f MB of block memory faulted in (%.0f ms at start; --read-reserve)",
                   WarmMemory::Get().HeldBytes() / 1e6,
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - fill_start).count());
    }
    started.set_value();
  });
  started.get_future().wait();
}

void Scheduler::RefillReadReserveWhenIdle() {
  WarmMemory& reserve = WarmMemory::Get();
  if (store_ == nullptr || reserve.HeldBytes() >= reserve.TargetBytes()) return;
  if (reserve_refill_posted_.exchange(true)) return;
  saves_.Post([this] {
    WarmMemory::Get().FillShare(0, 1);
    reserve_refill_posted_ = false;
  });
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
  remote_writes_.Flush();
}

// Client text (message contents, a completion prompt) is marked plain: a
// "<|im_start|>" or "</s>" in it is text, never a special token.
Result<engine::ChatPrompt> Scheduler::RenderPrompt(const api::GenerationRequest& r) const {
  if (r.kind == api::RequestKind::kCompletion) {
    engine::ChatPrompt p;
    p.rendered = engine::Tokenizer::RenderPlain(r.prompt);
    return p;
  }
  engine::ChatRequest chat = ToChatRequest(r, options_.reasoning_format);
  AGENTKV_RETURN_IF_ERROR(engine::CheckSchemaBytes(chat));  // before their conversion to a grammar
  return chat_format_->Render(chat);
}

int64_t Scheduler::MaxPromptBytes() const {
  return ContextTokens() * static_cast<int64_t>(tokenizer_.MaxTokenBytes());
}

int64_t Scheduler::CountPromptTokens(const api::GenerationRequest& request) const {
  Result<engine::ChatPrompt> prompt = RenderPrompt(request);
  if (!prompt.ok()) return 0;
  const engine::RenderedPrompt& rendered = prompt.value().rendered;
  return static_cast<int64_t>(tokenizer_.Tokenize(rendered.text, true, rendered.plain).tokens.size());
}

engine::TokenizedText Scheduler::TokenizeFull(const engine::RenderedPrompt& prompt) const {
  return tokenizer_.TokenizeInPieces(prompt.text, prompt.plain, tokenize_pieces_);
}

engine::TokenizedText Scheduler::TokenizePrompt(const AgentKey& key, const engine::RenderedPrompt& prompt,
                                                std::shared_ptr<const engine::PromptTokens>* entry) {
  if (key.agent_id.empty()) return TokenizeFull(prompt);
  size_t reused = 0;
  auto prev = prompt_tokens_.Get(key);
  if (prev == nullptr) prev = PromptTokensFromRead(key);
  engine::TokenizedText tokens = prev != nullptr
                                     ? tokenizer_.TokenizeExtending(*prev, prompt.text, prompt.plain, &reused)
                                     : TokenizeFull(prompt);
  metrics_.AddTokenized(tokens.tokens.size(), reused);
  *entry = std::make_shared<const engine::PromptTokens>(engine::PromptTokens{prompt.text, prompt.plain, tokens});
  return tokens;
}

std::shared_ptr<const engine::PromptTokens> Scheduler::PromptTokensFromRead(const AgentKey& key) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!agent_reads_.count(key)) return nullptr;
  const bool done = cv_.wait_for(lock, std::chrono::milliseconds(kPromptReadWaitMs), [&] {
    auto it = agent_reads_.find(key);
    return it == agent_reads_.end() || it->second.done;
  });
  auto it = agent_reads_.find(key);
  if (!done || it == agent_reads_.end() || !it->second.record) return nullptr;
  const AgentRecord& r = *it->second.record;
  const PromptPrefix& p = r.prompt;
  // The store's own check of a record (its prompt inside its tokens and text).
  if (p.n_tokens == 0 || !CheckRecord(r, /*check_blocks=*/false).ok()) return nullptr;
  auto prev = std::make_shared<engine::PromptTokens>();
  prev->text = r.text.substr(0, p.text_bytes);
  for (const CharSpan& c : p.plain) prev->plain.push_back({c.begin, c.end});
  prev->tokenized.tokens.assign(r.tokens.begin(), r.tokens.begin() + p.n_tokens);
  for (uint32_t i = 0; i < p.n_tokens; ++i) prev->tokenized.spans.push_back({r.spans[i].begin, r.spans[i].end});
  return prev;
}

Status Scheduler::Submit(api::GenerationRequest request, std::shared_ptr<api::GenerationSink> sink) {
  if (!running_) return Status::Unavailable("submit: the server is not ready");
  if (!request.agent_id.empty()) {
    AGENTKV_RETURN_IF_ERROR(ValidateName("agent id", request.agent_id));
  }
  AGENTKV_RETURN_IF_ERROR(ValidateName("namespace", request.namespace_id));
  const AgentKey key{request.namespace_id, request.agent_id};
  auto refuse_if_full = [&]() -> Status {  // REQUIRES mu_ held
    if (stopping_) return Status::Unavailable("submit: shutting down");
    if (n_waiting_.load() >= options_.max_queue) {
      return Status::ResourceExhausted("submit: queue full (" + std::to_string(options_.max_queue) + " waiting)");
    }
    return Status::OK();
  };
  // An agent that may be on disk: its read starts before the prompt is
  // tokenized, so the two overlap, and both overlap other agents' compute
  // (admission waits for the read). A refused request drops the read it began.
  // A new agent (the store's index holds no manifest of it) needs no read:
  // its entry is answered from the index (ReadFromStoreIndex), so it is not
  // queued behind other agents' loads. Not with a remote tier (the agent may
  // live there) nor with an unsaved turn (ReadAgent serves it from RAM).
  bool began_read = false;
  std::optional<uint64_t> index_read;
  if (!key.agent_id.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    AGENTKV_RETURN_IF_ERROR(refuse_if_full());
    if (store_ != nullptr && !resident_keys_.count(key) && !agent_reads_.count(key) && !pool_.Contains(key)) {
      if (remote_ == nullptr && !unsaved_.count(key)) {
        index_read = BeginAgentRead(key, nullptr);
      } else {
        PostAgentRead(key);
      }
      began_read = true;
    }
  }
  if (index_read) ReadFromStoreIndex(key, *index_read);
  auto refuse = [&](Status s) {
    if (began_read) {
      std::lock_guard<std::mutex> lock(mu_);
      agent_reads_.erase(key);  // an in-flight read finds no entry and discards its result
    }
    return s;
  };
  auto w = std::make_unique<Waiting>();
  w->received = request.received != Clock::time_point{} ? request.received : Clock::now();
  // Rendered and tokenized here, on the caller's thread, not on the
  // inference thread; the tokens live in the request and die with it.
  Result<engine::ChatPrompt> rendered = RenderPrompt(request);
  if (!rendered.ok()) return refuse(rendered.status());
  engine::ChatPrompt& prompt = rendered.value();
  if (request.kind == api::RequestKind::kChat && !key.agent_id.empty()) {
    w->head_bytes = HeadBytes(*chat_format_, ToChatRequest(request, options_.reasoning_format), prompt.rendered.text);
  }
  w->fresh = TokenizePrompt(key, prompt.rendered, &w->prompt_entry);
  w->plain = prompt.rendered.plain;
  w->prompt = std::move(prompt.rendered.text);
  if (!prompt.grammar.gbnf.empty()) {  // its cost is decided here, before the inference thread sees it
    Result<std::shared_ptr<const engine::Grammar>> grammar = engine::Grammar::Compile(model_, prompt.grammar);
    if (!grammar.ok()) return refuse(grammar.status());
    w->grammar = std::move(grammar).value();
  }
  w->reply_format = std::move(prompt.reply_format);
  for (std::string& stop : prompt.extra_stops) request.sampling.stop.push_back(std::move(stop));
  const int64_t n_prompt = static_cast<int64_t>(w->fresh.tokens.size());
  if (n_prompt >= ContextTokens()) {
    // The numbers travel as data: each API words them as its clients parse them.
    return refuse(Status::OutOfRange("The prompt is " + std::to_string(n_prompt) + " tokens; the context holds " +
                                     std::to_string(ContextTokens()) + " tokens including the reply.")
                      .WithQuantity({n_prompt, ContextTokens()}));
  }
  w->req = std::move(request);
  w->sink = std::move(sink);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Status s = refuse_if_full(); !s.ok()) {
      if (began_read) agent_reads_.erase(key);
      return s;
    }
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

namespace {

// An agent the table dropped (TrimAgentTable): known from its manifest only.
api::AgentInfo InfoFromSummary(const AgentSummary& s) {
  api::AgentInfo info;
  info.id = s.agent_id;
  info.tokens = s.n_tokens;
  info.last_used_unix_ms = s.last_used_ms;
  info.tier = api::CacheState::kWarm;
  return info;
}

}  // namespace

Result<std::vector<api::AgentInfo>> Scheduler::ListAgents(const std::string& ns) {
  ReadNamespaceIndex(ns);
  std::vector<api::AgentInfo> out;
  bool trimmed = false;
  RunOnLoop([&] {
    MergeNamespaceIndex(ns);
    trimmed = ns_trimmed_.count(ns) != 0;
    for (const auto& [key, agent] : agents_) {
      if (key.ns == ns) out.push_back(InfoOf(*agent));
    }
  });
  if (trimmed && store_ != nullptr) {  // the agents the table dropped are on disk
    std::set<std::string> listed;
    for (const auto& info : out) listed.insert(info.id);
    if (auto summaries = store_->ListAgents(ns); summaries.ok()) {
      for (const auto& s : *summaries) {
        if (s.usable && !listed.count(s.agent_id)) out.push_back(InfoFromSummary(s));
      }
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  }
  for (auto& info : out) FillDiskBytes(ns, &info);
  return out;
}

Result<api::AgentInfo> Scheduler::GetAgent(const std::string& ns, const std::string& agent_id) {
  ReadNamespaceIndex(ns);
  Result<api::AgentInfo> out = Status::NotFound("agent '" + agent_id + "' not found");
  bool trimmed = false;
  RunOnLoop([&] {
    MergeNamespaceIndex(ns);
    trimmed = ns_trimmed_.count(ns) != 0;
    if (Agent* a = FindAgent({ns, agent_id})) out = InfoOf(*a);
  });
  if (!out.ok() && trimmed && store_ != nullptr) {
    if (auto s = store_->GetSummary(ns, agent_id); s.ok() && s->usable) out = InfoFromSummary(*s);
  }
  if (out.ok()) FillDiskBytes(ns, &*out);
  return out;
}

Status Scheduler::DeleteAgent(const std::string& ns, const std::string& agent_id, bool evict_only) {
  AGENTKV_RETURN_IF_ERROR(ValidateName("agent id", agent_id));
  ReadNamespaceIndex(ns);
  const AgentKey key{ns, agent_id};
  Status result;
  bool erase_disk = false;
  bool only_on_disk = false;  // dropped from the table: its manifest decides whether it exists
  RunOnLoop([&] {
    MergeNamespaceIndex(ns);
    Agent* a = FindAgent(key);
    if (a == nullptr && ns_trimmed_.count(ns) && store_ != nullptr) {
      only_on_disk = true;
      if (evict_only) return;  // nothing of it is in a slot or RAM
    } else if (a == nullptr) {
      result = Status::NotFound("agent '" + agent_id + "' not found");
      return;
    } else if (a->busy) {
      result = Status::FailedPrecondition("agent '" + agent_id + "' has a request in flight");
      return;
    } else if (a->slot >= 0) {
      ctx_.ClearSlot(a->slot);
      SetSlotOwner(a->slot, nullptr);
    }
    if (evict_only) return;
    prompt_tokens_.Erase(key);  // it holds the agent's text
    (void)pool_.Erase(key);
    erase_disk = only_on_disk || a->on_disk;
    {
      std::lock_guard<std::mutex> lock(mu_);
      deleting_.insert(key);  // no read may bring it back while its files go
      unsaved_.erase(key);
      agent_reads_.erase(key);
    }
    EraseAgent(key);
  });
  if (!result.ok()) return result;
  if (only_on_disk && evict_only) {  // nothing to evict; does it exist?
    return store_->GetSummary(ns, agent_id).ok() ? Status::OK() : Status::NotFound("agent '" + agent_id + "' not found");
  }
  WaitForSaves(key);  // its queued saves land before it is evicted or erased
  if (evict_only) return pool_.Contains(key) ? pool_.EvictToDisk(key) : Status::OK();
  if (erase_disk && store_ != nullptr) result = store_->DeleteAgent(ns, agent_id);
  if (result.code() == StatusCode::kNotFound) {
    result = only_on_disk ? Status::NotFound("agent '" + agent_id + "' not found") : Status::OK();
  }
  if (result.ok() && remote_ != nullptr) {
    remote_writes_.Flush();  // no push of this agent may land after its erasure
    if (Status r = remote_->Delete(ns, agent_id); !r.ok()) {
      result = Status::Unavailable("agent erased here, but not from the remote tier (retry): " + r.message());
    }
  }
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
  g.io_pending = reads_.Pending() + saves_.Pending() + remote_writes_.Pending();
  {
    std::lock_guard<std::mutex> lock(mu_);
    g.unsaved_agents = unsaved_.size();
  }
  const auto ps = pool_.Stats();
  g.hot_agents = ps.n_agents;
  g.hot_bytes = ps.used_bytes;
  g.hot_budget_bytes = ps.budget_bytes;
  g.agent_table_agents = table_agents_gauge_.load();
  g.agent_table_bytes = table_bytes_gauge_.load();
  g.agent_table_budget_bytes = options_.agent_table_bytes;
  g.read_reserve_bytes = WarmMemory::Get().HeldBytes();
  g.read_reserve_target_bytes = WarmMemory::Get().TargetBytes();
  g.resident_agents = resident_agents_.load();
  g.resident_bytes = resident_tokens_.load() * ctx_.spec().SlotBytesPerToken();  // slot types (f16 in hybrid slots)
  if (store_ != nullptr) {
    const auto ss = store_->stats();
    g.warm_agents = ss.agents;
    g.warm_bytes = ss.disk_bytes;
    g.disk_out_of_space = ss.saves_out_of_space;
    g.disk_evictions_no_space = ss.agents_evicted_for_space;
    g.disk_evictions_budget = ss.agents_evicted - ss.agents_evicted_for_space;
  }
  std::string text = metrics_.Render(g);
  if (remote_ != nullptr) text += remote_->RenderMetrics();
  return text;
}

}  // namespace agentkv::sched
