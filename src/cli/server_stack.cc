#include "cli/server_stack.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "engine/chat_format.h"
#include "engine/context_size.h"
#include "store/cache_admin.h"
#include "util/log.h"

namespace agentkv::cli {

// Answers "not ready" until the scheduler exists, then forwards. Lets the
// HTTP server come up (and /health say 503) while the model loads.
class ServerStack::DeferredBackend : public api::Backend {
 public:
  void Set(api::Backend* b) { target_.store(b); }
  std::string ModelId() const override { return model_id_; }
  void SetModelId(std::string id) { model_id_ = std::move(id); }
  bool IsReady() const override {
    auto* t = target_.load();
    return t != nullptr && t->IsReady();
  }
  int64_t ContextTokens() const override {
    auto* t = target_.load();
    return t ? t->ContextTokens() : 0;
  }
  int64_t MaxPromptBytes() const override {
    auto* t = target_.load();
    return t ? t->MaxPromptBytes() : 0;
  }
  Status Submit(api::GenerationRequest r, std::shared_ptr<api::GenerationSink> s) override {
    auto* t = target_.load();
    if (!t) return Status::Unavailable("model loading");
    return t->Submit(std::move(r), std::move(s));
  }
  Result<std::vector<api::AgentInfo>> ListAgents(const std::string& ns) override {
    auto* t = target_.load();
    if (!t) return Status::Unavailable("model loading");
    return t->ListAgents(ns);
  }
  Result<api::AgentInfo> GetAgent(const std::string& ns, const std::string& id) override {
    auto* t = target_.load();
    if (!t) return Status::Unavailable("model loading");
    return t->GetAgent(ns, id);
  }
  Status DeleteAgent(const std::string& ns, const std::string& id, bool evict_only) override {
    auto* t = target_.load();
    if (!t) return Status::Unavailable("model loading");
    return t->DeleteAgent(ns, id, evict_only);
  }
  std::string MetricsText() const override {
    auto* t = target_.load();
    return t ? t->MetricsText() : "";
  }
  std::string SystemFingerprint() const override {
    auto* t = target_.load();
    return t ? t->SystemFingerprint() : "";
  }

 private:
  std::atomic<api::Backend*> target_{nullptr};
  std::string model_id_;
};

std::string DefaultCacheDir() {
  if (const char* d = std::getenv("AGENTKV_CACHE_DIR")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/agentkv/kv";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/agentkv/kv";
}

uint64_t DefaultCacheRamBytes() {
  const uint64_t ram_bytes = engine::PhysicalRamBytes();
  return ram_bytes > 0 ? ram_bytes / 4 : uint64_t{1} << 30;
}

Result<uint64_t> ParseBytes(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB")) unit.resize(unit.size() - 2);
  if (unit.ends_with("B")) unit.resize(unit.size() - 1);
  double mult = 1;
  if (unit == "K") mult = 1024.0;
  else if (unit == "M") mult = 1024.0 * 1024;
  else if (unit == "G") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) return Status::InvalidArgument("bytes: bad unit in '" + text + "'");
  if (end == text.c_str() || !(v >= 0) || !std::isfinite(v)) return Status::InvalidArgument("bytes: '" + text + "'");
  return static_cast<uint64_t>(v * mult);
}

namespace {

// The start-up's phases, timed for one log line (issue 34 compares our
// start-up with llama-server's; this says where ours goes).
class StartupPhases {
 public:
  explicit StartupPhases(std::chrono::steady_clock::time_point start) : start_(start), last_(start) {}

  // Ends the phase that began at the previous mark (or at the start).
  void Mark(const char* name) {
    const auto now = std::chrono::steady_clock::now();
    phases_.emplace_back(name, std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }

  // "start-up 1234 ms: model 800 ms, context (...) 300 ms, ..."
  std::string Describe() const {
    std::string line = "start-up " + Ms(last_ - start_) + ":";
    for (size_t i = 0; i < phases_.size(); ++i) {
      line += (i == 0 ? " " : ", ") + phases_[i].first + " " +
              std::to_string(static_cast<long long>(std::lround(phases_[i].second))) + " ms";
    }
    return line;
  }

 private:
  static std::string Ms(std::chrono::steady_clock::duration d) {
    return std::to_string(static_cast<long long>(
               std::lround(std::chrono::duration<double, std::milli>(d).count()))) + " ms";
  }

  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  std::vector<std::pair<std::string, double>> phases_;
};

// -c 0: the trained context capped by the memory the slots' KV lives in
// (engine/context_size.h): the GPU's free memory once the weights are on it,
// else physical RAM less the weights and the RAM pool's budget.
engine::ContextSizeChoice AutoSlotContext(const engine::ModelInfo& info, engine::KvType slot_type,
                                          engine::KvType at_rest_type, int n_slots, uint64_t pool_budget_bytes) {
  engine::ContextSizeInput in;
  in.n_ctx_train = info.n_ctx_train;
  in.n_slots = n_slots;
  in.kv_bytes_per_token = engine::EstimateKvBytesPerToken(info, slot_type, slot_type);
  // The staging buffer and the read landing hold one slot's state each, the
  // read reserve one slot's blocks at rest (q4_0): all sized at start.
  in.host_bytes_per_token =
      2 * in.kv_bytes_per_token + engine::EstimateKvBytesPerToken(info, at_rest_type, at_rest_type);
  const uint64_t ram_bytes = engine::PhysicalRamBytes();
  const uint64_t gpu_free_bytes = info.n_gpu_layers > 0 ? engine::FreeGpuMemoryBytes() : 0;
  if (gpu_free_bytes > 0) {
    in.available_bytes = gpu_free_bytes;
    in.memory_name = "GPU memory";
    // The weights are on the GPU; the host buffers share RAM with the pool.
    in.host_available_bytes = ram_bytes > pool_budget_bytes ? ram_bytes - pool_budget_bytes : 1;
    if (ram_bytes == 0) in.host_bytes_per_token = 0;  // unknown RAM: the GPU decides alone
    return engine::ChooseSlotContext(in);
  }
  if (ram_bytes == 0) in.kv_bytes_per_token = 0;  // unknown: the trained context
  const uint64_t reserved_bytes = info.file_bytes + pool_budget_bytes;
  in.available_bytes = ram_bytes > reserved_bytes ? ram_bytes - reserved_bytes : 0;
  return engine::ChooseSlotContext(in);
}

}  // namespace

ServerStack::~ServerStack() { Stop(); }

Result<std::unique_ptr<ServerStack>> ServerStack::Start(const ServerConfig& config) {
  const std::string cache_dir = config.cache_dir.empty() ? DefaultCacheDir() : config.cache_dir;
  // Fail fast, before the port and the model: AgentStore::Open's lock is
  // what excludes a second server; this only saves loading a model for nothing.
  AGENTKV_ASSIGN_OR_RETURN(bool in_use, CacheInUse(nullptr, cache_dir));
  if (in_use) {
    return Status::FailedPrecondition("cache dir " + cache_dir + " is in use by another agentkv server (it holds " +
                                      CacheLockPath(cache_dir) + "); stop it or pass another --cache-dir");
  }
  auto stack = std::unique_ptr<ServerStack>(new ServerStack());
  stack->config_ = config;
  stack->backend_ = std::make_unique<DeferredBackend>();
  stack->backend_->SetModelId(std::filesystem::path(config.model_path).stem().string());
  if (config.http) {
    AGENTKV_ASSIGN_OR_RETURN(api::ApiKeys keys, api::ApiKeys::Parse(config.api_keys, config.admin_key));
    api::RouterOptions ro;
    ro.listed_model_aliases = config.model_aliases;
    ro.model_aliases = config.model_aliases;
    ro.model_aliases.push_back(std::filesystem::path(config.model_path).filename().string());
    ro.model_aliases.push_back("agentkv");
    ro.strict_model_name = config.strict_model_name;
    // With several tenants, none may take more than half the queue.
    const size_t max_queue = sched::SchedulerOptions{}.max_queue;
    ro.max_requests_per_tenant = config.tenant_requests >= 0 ? static_cast<size_t>(config.tenant_requests)
                                 : config.api_keys.size() >= 2 ? max_queue / 2
                                                               : 0;
    if (config.api_keys.empty() && !config.quiet) {
      AKV_LOG_WARN("no --api-key: every client shares one namespace and can read and continue every agent");
    }
    stack->router_ = std::make_unique<api::Router>(stack->backend_.get(), std::move(keys), ro);
    api::HttpServerOptions ho;
    ho.host = config.host;
    ho.port = config.port;
    // Every request in flight (queued or generating) holds one worker thread.
    ho.worker_threads = config.n_slots + static_cast<int>(sched::SchedulerOptions{}.max_queue) + 8;
    stack->http_ = std::make_unique<api::HttpServer>(stack->router_.get(), ho);
    AGENTKV_ASSIGN_OR_RETURN(stack->port_, stack->http_->Start());
    if (!config.quiet) AKV_LOG_INFO("listening on http://%s:%d (loading model...)", config.host.c_str(), stack->port_);
  }

  if (!config.quiet) AKV_LOG_INFO("loading %s", config.model_path.c_str());
  engine::ModelOptions mo;
  mo.n_gpu_layers = config.n_gpu_layers;
  // The digest of all weights (the model fingerprint) is cached beside the
  // KV caches; a dot directory is never taken for a fingerprint directory.
  mo.weights_digest.cache_dir = cache_dir + "/.model-digests";
  const auto t_load = std::chrono::steady_clock::now();
  StartupPhases phases(t_load);
  AGENTKV_ASSIGN_OR_RETURN(stack->model_, engine::Model::Load(config.model_path, mo));
  phases.Mark("model");
  if (!config.quiet && stack->model_->info().weights_bytes_hashed > 0) {
    AKV_LOG_INFO("fingerprinted all %.0f MiB of weights (load %.1f s; cached for the next start)",
                 double(stack->model_->info().weights_bytes_hashed) / (1 << 20),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count());
  }
  const uint64_t pool_budget_bytes = config.cache_ram_bytes > 0 ? config.cache_ram_bytes : DefaultCacheRamBytes();
  engine::ContextOptions co;
  co.n_slots = config.n_slots;
  co.type_k = co.type_v = config.kv_type;
  co.slot_type_k = co.slot_type_v =
      engine::ResolveSlotKvType(config.slot_kv_type, config.kv_type);
  if (config.slot_ctx > 0) {
    co.slot_ctx = config.slot_ctx;
    if (!config.quiet) AKV_LOG_INFO("context: %d tokens per slot (-c)", co.slot_ctx);
  } else {
    const engine::ContextSizeChoice choice =
        AutoSlotContext(stack->model_->info(), *co.slot_type_k, co.type_k, co.n_slots, pool_budget_bytes);
    co.slot_ctx = choice.slot_ctx;
    if (choice.at_floor) {
      AKV_LOG_WARN("context: %d tokens per slot (%s); pass -c or fewer --slots", co.slot_ctx, choice.reason.c_str());
    } else if (!config.quiet) {
      AKV_LOG_INFO("context: %d tokens per slot (%s)", co.slot_ctx, choice.reason.c_str());
    }
  }
  co.n_threads = config.n_threads;
  const int prefill_chunk = engine::ChoosePrefillChunk(config.prefill_chunk, stack->model_->info().n_gpu_layers);
  if (!config.quiet) AKV_LOG_INFO("prefill chunk: %d tokens per step%s", prefill_chunk,
                                  config.prefill_chunk > 0 ? " (--prefill-chunk)" : "");
  co.n_batch = std::max(prefill_chunk, 64);
  co.warmup = config.warmup;
  // The staging buffer and the read landing (one slot's state each,
  // page-locked on a GPU: 230-350 ms each at 32K on an H100, stop 33) are
  // reserved on the start-up's path by default; --staging-reserve /
  // --landing-reserve beside reserves them on threads of their own, beside
  // the warm-up, the store's scan and the read reserve, and waits for them
  // before the server serves (issue 34; not yet measured with registered
  // memory, bench/next-device-runs.md).
  using When = engine::StagingBuffer::When;
  co.staging_reserve = config.staging_reserve;
  AGENTKV_ASSIGN_OR_RETURN(stack->context_, engine::Context::Create(*stack->model_, co));
  phases.Mark(co.staging_reserve == When::kNow ? "context (probe, warm-up, staging buffer)"
                                              : "context (probe, warm-up)");
  const engine::ModelCacheSpec& spec = stack->context_->spec();

  AgentStoreOptions so;
  so.cache_dir = cache_dir;
  so.fingerprint = spec.fingerprint;
  so.kv_types = spec.KvTypesString();
  so.disk_budget_bytes = config.cache_disk_bytes;
  so.disk_budget_per_ns_bytes = config.cache_disk_per_tenant_bytes;
  so.read_threads = config.read_threads;
  so.read_chunk_bytes = config.read_chunk_bytes;
  AGENTKV_ASSIGN_OR_RETURN(stack->store_, AgentStore::Open(so));
  phases.Mark("store");

  BlockPoolOptions po;
  po.budget_bytes = pool_budget_bytes;
  // The pool only drops agents that are clean (saved by the scheduler's
  // write-behind), so a Put never writes to disk.
  ServerStack* raw = stack.get();
  po.on_evict = [raw](const EvictionEvent& e) { raw->scheduler_->OnPoolEviction(e); };
  stack->pool_ = std::make_unique<BlockPool>(po);

  sched::SchedulerOptions opt;
  opt.model_id = stack->backend_->ModelId();
  if (!config.chat_template.empty()) {
    AGENTKV_RETURN_IF_ERROR(engine::ChatFormat::CheckTemplate(*stack->model_, config.chat_template)
                                .WithContext("--chat-template-file"));
  }
  opt.chat_template = config.chat_template;
  opt.reasoning_format = config.reasoning_format;
  opt.read_landing = config.read_landing;
  opt.read_reserve = config.read_reserve;
  opt.pipelined_restore = config.pipelined_restore;
  opt.read_landing_reserve = config.landing_reserve;
  opt.prefill_chunk = prefill_chunk;
  if (config.agent_table_bytes > 0) opt.agent_table_bytes = config.agent_table_bytes;
  if (!config.remote_url.empty()) {
    AGENTKV_ASSIGN_OR_RETURN(RedisOptions ro, ParseRedisUrl(config.remote_url));
    AGENTKV_RETURN_IF_ERROR(LoadRedisPassword(config.remote_password_file, &ro));
    stack->remote_store_ = std::make_unique<RedisRemoteStore>(ro);
    // Down now is not fatal: the tier is used whenever it answers.
    if (Status s = stack->remote_store_->Ping(); !s.ok()) {
      if (s.code() == StatusCode::kFailedPrecondition) return s.WithContext("--remote");  // wrong password, bad db
      AKV_LOG_WARN("remote tier %s is not answering (%s); starting without it until it does",
                   stack->remote_store_->Describe().c_str(), s.message().c_str());
    } else if (!config.quiet) {
      AKV_LOG_INFO("remote tier: %s", stack->remote_store_->Describe().c_str());
    }
    stack->remote_tier_ = std::make_unique<RemoteTier>(stack->remote_store_.get(), spec.fingerprint, spec.KvTypesString());
    opt.remote = stack->remote_tier_.get();
  }
  stack->scheduler_ = std::make_unique<sched::Scheduler>(*stack->model_, *stack->context_, *stack->pool_,
                                                          stack->store_.get(), opt);
  stack->scheduler_->Start();
  phases.Mark(opt.read_landing_reserve == When::kNow ? "scheduler (read reserve, read landing)"
                                                      : "scheduler (read reserve)");
  if (co.staging_reserve == When::kBeside || opt.read_landing_reserve == When::kBeside) {
    if (co.staging_reserve == When::kBeside) stack->context_->WaitStagingReserved();
    if (opt.read_landing_reserve == When::kBeside) stack->scheduler_->WaitReadLandingReserved();
    phases.Mark("the rest of the buffers reserved beside");
  }
  stack->backend_->Set(stack->scheduler_.get());
  if (!config.quiet) {
    AKV_LOG_INFO("%s", phases.Describe().c_str());
    const auto st = stack->store_->stats();
    AKV_LOG_INFO("ready: model %s (%s), %d slots x %d tokens, kv %s (%llu B/token) at rest, %s in slots (%llu B/token%s), "
                 "cache %s (%llu warm agents), RAM pool %.0f MiB",
                 stack->model_->info().name.c_str(), stack->model_->info().architecture.c_str(), co.n_slots,
                 co.slot_ctx, engine::KvTypeName(config.kv_type),
                 static_cast<unsigned long long>(spec.RestBytesPerToken()), engine::KvTypeName(spec.slot_type_k),
                 static_cast<unsigned long long>(spec.SlotBytesPerToken()),
                 stack->context_->RoundsSlotRowsToRest() ? ", rows rounded to q4_0 as written: restores exact" : "",
                 stack->store_->root_dir().c_str(), static_cast<unsigned long long>(st.agents),
                 double(po.budget_bytes) / (1 << 20));
  }
  return stack;
}

void ServerStack::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (http_) http_->Stop();
  if (backend_) backend_->Set(nullptr);
  if (scheduler_) scheduler_->Stop();  // finishes in-flight turns, flushes saves
}

}  // namespace agentkv::cli
