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
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv::sched {

namespace {

// Pipelined restores where the options and the model allow them.
bool PipelinedPossible(const engine::Context& ctx, AgentStore* store, const SchedulerOptions& options) {
  if (store == nullptr || !options.pipelined_restore.value_or(ctx.staging_pinned())) return false;
  if (!engine::LayerGatedImport::Supports(ctx.spec().slot_shape)) {
    // A sliding-window model's two caches (the landing plans none of them either).
    if (options.pipelined_restore.has_value()) {
      AKV_LOG_INFO("pipelined restore: off for this model (more than one KV cache: sliding window)");
    }
    return false;
  }
  return true;
}

std::unique_ptr<ReadLanding> MakeLanding(const engine::Context& ctx, AgentStore* store,
                                         const SchedulerOptions& options, bool pipelined) {
  if (store == nullptr || !(options.read_landing.value_or(ctx.staging_pinned()) || pipelined)) return nullptr;
  const auto n_stream = static_cast<uint32_t>(ctx.options().n_slots);
  return std::make_unique<ReadLanding>(
      ctx.spec().layout(), n_stream,
      engine::MaxStateBytes(ctx.spec().slot_shape, static_cast<uint32_t>(ctx.options().slot_ctx), n_stream),
      ctx.staging_pinned());
}

}  // namespace

Scheduler::Scheduler(engine::Model& model, engine::Context& ctx, BlockPool& pool, AgentStore* store,
                     SchedulerOptions options)
    : model_(model), ctx_(ctx), tokenizer_(model), chat_format_(engine::ChatFormat::Create(model, tokenizer_, options.chat_template)),
      pool_(pool), options_(std::move(options)), tokenize_pieces_(std::clamp(ctx.n_threads(), 1, 8)),
      slot_owner_(static_cast<size_t>(ctx.options().n_slots), nullptr),
      pipelined_(PipelinedPossible(ctx, store, options_)),
      tiers_(pool, store, options_.remote, metrics_, options_.prompt_token_cache_bytes,
             options_.agent_table_bytes, MakeLanding(ctx, store, options_, pipelined_), pipelined_,
             [this] { WakeLoopForRead(); }),
      table_(tiers_.table()) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (thread_.joinable()) return;
    stopping_ = false;
    running_ = true;
    thread_ = std::thread([this] { Loop(); });
  }
  std::vector<std::pair<size_t, size_t>> reserve;
  if (tiers_.has_store() && options_.read_reserve.value_or(true)) {
    reserve = engine::BlockTensorSizes(ctx_.spec().shape, static_cast<uint32_t>(ctx_.options().slot_ctx));
  }
  tiers_.Start(reserve);
}

void Scheduler::WakeLoopForRead() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    read_completed_ = true;
  }
  cv_.notify_all();
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
  tiers_.Flush();
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
  auto prev = tiers_.PreviousPrompt(key, std::chrono::milliseconds(kPromptReadWaitMs));
  engine::TokenizedText tokens = prev != nullptr
                                     ? tokenizer_.TokenizeExtending(*prev, prompt.text, prompt.plain, &reused)
                                     : TokenizeFull(prompt);
  metrics_.AddTokenized(tokens.tokens.size(), reused);
  *entry = std::make_shared<const engine::PromptTokens>(engine::PromptTokens{prompt.text, prompt.plain, tokens});
  return tokens;
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
  // tokenized (AgentTiers::BeginReadForSubmit), so the two overlap, and both
  // overlap other agents' compute. A refused request drops the read it began.
  bool began_read = false;
  if (!key.agent_id.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      AGENTKV_RETURN_IF_ERROR(refuse_if_full());
    }
    began_read = tiers_.BeginReadForSubmit(key);
  }
  auto refuse = [&](Status s) {
    if (began_read) tiers_.DropRead(key);  // an in-flight read finds no entry and discards its result
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
  Status full;
  {
    std::lock_guard<std::mutex> lock(mu_);
    full = refuse_if_full();
    if (full.ok()) {
      incoming_.push_back(std::move(w));
      ++n_waiting_;  // submitted, not yet admitted or refused
    }
  }
  if (!full.ok()) return refuse(full);  // (AgentTiers' lock is never taken under mu_)
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

// An agent the table dropped (AgentTable::Trim): known from its manifest only.
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
  tiers_.ReadNamespaceIndex(ns);
  std::vector<api::AgentInfo> out;
  bool trimmed = false;
  RunOnLoop([&] {
    tiers_.MergeNamespaceIndex(ns);
    trimmed = table_.Trimmed(ns);
    table_.ForEachIn(ns, [&](const Agent& a) { out.push_back(tiers_.InfoOf(a, ctx_.spec().SlotBytesPerToken())); });
  });
  if (trimmed) {  // the agents the table dropped are on disk
    std::set<std::string> listed;
    for (const auto& info : out) listed.insert(info.id);
    for (const auto& s : tiers_.DiskAgents(ns)) {
      if (!listed.count(s.agent_id)) out.push_back(InfoFromSummary(s));
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  }
  for (auto& info : out) tiers_.FillDiskBytes(ns, &info);
  return out;
}

Result<api::AgentInfo> Scheduler::GetAgent(const std::string& ns, const std::string& agent_id) {
  tiers_.ReadNamespaceIndex(ns);
  Result<api::AgentInfo> out = Status::NotFound("agent '" + agent_id + "' not found");
  bool trimmed = false;
  RunOnLoop([&] {
    tiers_.MergeNamespaceIndex(ns);
    trimmed = table_.Trimmed(ns);
    if (Agent* a = table_.Find({ns, agent_id})) out = tiers_.InfoOf(*a, ctx_.spec().SlotBytesPerToken());
  });
  if (!out.ok() && trimmed) {
    if (auto s = tiers_.DiskAgent({ns, agent_id}); s && s->usable) out = InfoFromSummary(*s);
  }
  if (out.ok()) tiers_.FillDiskBytes(ns, &*out);
  return out;
}

Status Scheduler::DeleteAgent(const std::string& ns, const std::string& agent_id, bool evict_only) {
  AGENTKV_RETURN_IF_ERROR(ValidateName("agent id", agent_id));
  tiers_.ReadNamespaceIndex(ns);
  const AgentKey key{ns, agent_id};
  Status result;
  bool erase_disk = false;
  bool only_on_disk = false;  // dropped from the table: its manifest decides whether it exists
  RunOnLoop([&] {
    tiers_.MergeNamespaceIndex(ns);
    Agent* a = table_.Find(key);
    if (a == nullptr && table_.Trimmed(ns) && tiers_.has_store()) {
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
    erase_disk = only_on_disk || a->on_disk;
    tiers_.BeginErase(key);
    table_.Erase(key);
  });
  if (!result.ok()) return result;
  if (only_on_disk && evict_only) {  // nothing to evict; does it exist?
    return tiers_.DiskAgent(key) ? Status::OK() : Status::NotFound("agent '" + agent_id + "' not found");
  }
  if (evict_only) return tiers_.EvictToDisk(key);
  return tiers_.EraseStored(key, erase_disk, only_on_disk);
}

void Scheduler::OnPoolEviction(const EvictionEvent&) { metrics_.CountEviction("pool"); }

std::string Scheduler::MetricsText() const {
  SchedulerMetrics::Gauges g;
  g.queue_length = n_waiting_.load();
  g.active_requests = n_active_.load();
  tiers_.FillGauges(&g);
  const auto ps = pool_.Stats();
  g.hot_agents = ps.n_agents;
  g.hot_bytes = ps.used_bytes;
  g.hot_budget_bytes = ps.budget_bytes;
  g.agent_table_agents = table_.agents_gauge();
  g.agent_table_bytes = table_.bytes_gauge();
  g.agent_table_budget_bytes = options_.agent_table_bytes;
  g.resident_agents = resident_agents_.load();
  g.resident_bytes = resident_tokens_.load() * ctx_.spec().SlotBytesPerToken();  // slot types (f16 in hybrid slots)
  std::string text = metrics_.Render(g);
  return text + tiers_.RemoteMetricsText();
}

}  // namespace agentkv::sched
