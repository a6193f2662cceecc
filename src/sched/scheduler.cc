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
      ctx.staging_pinned(), options.read_landing_reserve);
}

}  // namespace

Scheduler::Scheduler(engine::Model& model, engine::Context& ctx, BlockPool& pool, AgentStore* store,
                     SchedulerOptions options)
    : ctx_(ctx), tokenizer_(model), pool_(pool), options_(std::move(options)),
      prompter_(model, tokenizer_, options_.chat_template, options_.reasoning_format, std::clamp(ctx.n_threads(), 1, 8),
                tiers_, metrics_),
      slots_(ctx.options().n_slots),
      pipelined_(PipelinedPossible(ctx, store, options_)),
      tiers_(pool, store, options_.remote, metrics_, options_.prompt_token_cache_bytes,
             options_.agent_table_bytes, MakeLanding(ctx, store, options_, pipelined_), pipelined_, &slots_,
             [this] { WakeLoopForRead(); }),
      table_(tiers_.table()),
      admin_(tiers_, ctx_.spec().SlotBytesPerToken(), [this](std::function<void()> task) { RunOnLoop(std::move(task)); },
             [this](Agent& a) {
               ctx_.ClearSlot(a.slot);
               slots_.Set(a.slot, nullptr);
             }) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  {
    MutexLock lock(&lifecycle_mu_);
    if (thread_.joinable()) return;
    inbox_.Open();
    running_ = true;
    thread_ = std::thread([this] { Loop(); });
  }
  std::vector<std::pair<size_t, size_t>> reserve;
  if (tiers_.has_store() && options_.read_reserve.value_or(true)) {
    reserve = engine::BlockTensorSizes(ctx_.spec().shape, static_cast<uint32_t>(ctx_.options().slot_ctx));
  }
  tiers_.Start(reserve);
}

void Scheduler::Stop() {
  MutexLock lock(&lifecycle_mu_);
  if (!thread_.joinable()) return;
  inbox_.Close();
  thread_.join();
  running_ = false;
  tiers_.Flush();
}

int64_t Scheduler::MaxPromptBytes() const {
  return ContextTokens() * static_cast<int64_t>(tokenizer_.MaxTokenBytes());
}

Status Scheduler::Submit(api::GenerationRequest request, std::shared_ptr<api::GenerationSink> sink) {
  if (!running_) return Status::Unavailable("submit: the server is not ready");
  if (!request.agent_id.empty()) {
    AGENTKV_RETURN_IF_ERROR(ValidateName("agent id", request.agent_id));
  }
  AGENTKV_RETURN_IF_ERROR(ValidateName("namespace", request.namespace_id));
  const AgentKey key{request.namespace_id, request.agent_id};
  auto refuse_if_full = [&](bool closed) -> Status {  // under the inbox's lock
    if (closed) return Status::Unavailable("submit: shutting down");
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
    AGENTKV_RETURN_IF_ERROR(inbox_.Push(nullptr, refuse_if_full));
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
  if (Status s = prompter_.Prepare(request, ContextTokens(), w.get()); !s.ok()) return refuse(s);
  w->req = std::move(request);
  w->sink = std::move(sink);
  Status full = inbox_.Push(&w, [&](bool closed) {
    Status s = refuse_if_full(closed);
    if (s.ok()) ++n_waiting_;  // submitted, not yet admitted or refused
    return s;
  });
  return full.ok() ? full : refuse(full);  // (AgentTiers' lock is never taken under the inbox's)
}

void Scheduler::RunOnLoop(std::function<void()> task) {
  if (!running_) {
    task();  // no inference thread: the caller is the only user
    return;
  }
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  inbox_.Post([task = std::move(task), done] {
    task();
    done->set_value();
  });
  fut.wait();
}

void Scheduler::RunTasks() {
  for (auto& t : inbox_.TakeTasks()) t();
}

void Scheduler::OnPoolEviction(const EvictionEvent&) { metrics_.CountEviction("pool"); }

std::string Scheduler::MetricsText() const {
  SchedulerMetrics::Gauges g;
  g.queue_length = n_waiting_.load();
  g.active_requests = n_active_.load();
  tiers_.FillGauges(&g);
  g.staging_page_locked_bytes = ctx_.staging_page_locked_bytes();
  g.staging_heap_bytes = ctx_.staging_heap_bytes();
  g.resident_agents = slots_.agents_gauge();
  g.resident_bytes = slots_.tokens_gauge() * ctx_.spec().SlotBytesPerToken();  // slot types (f16 in hybrid slots)
  std::string text = metrics_.Render(g);
  return text + tiers_.RemoteMetricsText();
}

}  // namespace agentkv::sched
