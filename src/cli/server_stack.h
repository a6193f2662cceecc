#pragma once
// ServerStack: builds agentkv's object graph (model, engine context, disk
// store, RAM pool, scheduler, router, HTTP server) from a ServerConfig, and
// tears it down in the right order. Used by `serve`, `demo` and `run`.
//
// Thread safety: Start/Stop from one controlling thread.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/http_server.h"
#include "api/router.h"
#include "engine/context.h"
#include "engine/model.h"
#include "kv/block_pool.h"
#include "remote/redis_remote_store.h"
#include "remote/remote_tier.h"
#include "sched/scheduler.h"
#include "store/agent_store.h"

namespace agentkv::cli {

struct ServerConfig {
  std::string model_path;
  std::string chat_template;  // --chat-template-file's text; empty: the model's own template
  api::ReasoningFormat reasoning_format = api::ReasoningFormat::kAuto;  // --reasoning-format
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port
  bool http = true;                // false: no HTTP server (agentkv run)
  int slot_ctx = 0;                // 0: the model's trained context capped by memory (engine/context_size.h)
  int n_slots = 4;
  engine::KvType kv_type = engine::KvType::kQ4_0;  // at rest (--kv): RAM pool, disk, remote
  std::optional<engine::KvType> slot_kv_type;       // --slot-kv; unset: auto (engine::ResolveSlotKvType)
  int n_threads = 0;
  int n_gpu_layers = -1;           // -1: all layers on the GPU if one is available
  int prefill_chunk = 0;           // 0: by where the layers run (engine::ChoosePrefillChunk)
  std::string cache_dir;           // empty: DefaultCacheDir()
  uint64_t cache_ram_bytes = 0;    // 0: DefaultCacheRamBytes()
  uint64_t cache_disk_bytes = 0;   // 0: unlimited
  uint64_t cache_disk_per_tenant_bytes = 0;  // 0: none; else each namespace's own LRU first (docs/store-format.md)
  uint64_t agent_table_bytes = 0;  // 0: SchedulerOptions' default (--agent-table-ram)
  std::vector<std::string> api_keys;  // "KEY", "NAME:KEY" or "NAME:KEY:isolated"
  std::string admin_key;              // "" = none (api/auth.h: who may read /metrics)
  int tenant_requests = -1;           // per-key in-flight cap; 0 none; -1: half the queue with 2+ keys
  // Remote tier (docs/remote.md): redis://[user:pass@]host:port[/db]; "" none.
  std::string remote_url;
  std::string remote_password_file;  // first line is the password (else $AGENTKV_REMOTE_PASSWORD or the URL's)
  bool quiet = false;
  std::vector<std::string> model_aliases;  // --alias: more names /v1/models lists (and accepts)
  bool warmup = true;                      // --no-warmup: skip the throw-away decode at start (engine/context.h)
  bool strict_model_name = false;          // --strict-model-name: refuse other "model" values (404)
  std::optional<bool> read_landing;        // --read-landing on|off; unset (auto): SchedulerOptions' default
  std::optional<bool> read_reserve;        // --read-reserve on|off; unset (auto): SchedulerOptions' default
  std::optional<bool> pipelined_restore;   // --pipelined-restore on|off; unset (auto): SchedulerOptions' default
  // --staging-reserve / --landing-reserve start|beside|background (auto: start): when the staging buffer
  // (engine/context.h) and the read landing (sched/read_landing.h) are reserved (engine::StagingBuffer::When).
  engine::StagingBuffer::When staging_reserve = engine::StagingBuffer::When::kNow;
  engine::StagingBuffer::When landing_reserve = engine::StagingBuffer::When::kNow;
  int read_threads = 0;                    // --read-threads N: a disk load's reads in flight (0: the store's default)
  std::optional<size_t> read_chunk_bytes;  // --read-chunk-kib N: each read's size (0: a file; unset: the store's choice)
};

// $AGENTKV_CACHE_DIR, else $XDG_CACHE_HOME/agentkv/kv, else ~/.cache/agentkv/kv.
std::string DefaultCacheDir();
// 25% of physical memory (the rest is for the model, slots and the OS).
uint64_t DefaultCacheRamBytes();
// "512M", "4G", "1.5GiB", "123456" -> bytes; InvalidArgument otherwise.
Result<uint64_t> ParseBytes(const std::string& text);

class ServerStack {
 public:
  ~ServerStack();  // Stop()
  // Starts the HTTP server first (it answers 503 while the model loads), then
  // loads the model and starts the scheduler.
  static Result<std::unique_ptr<ServerStack>> Start(const ServerConfig& config);
  // Graceful: stops HTTP, cancels in-flight work, flushes saves. Idempotent.
  void Stop();

  int port() const { return port_; }
  sched::Scheduler& scheduler() { return *scheduler_; }
  const engine::Context& context() const { return *context_; }
  const engine::Model& model() const { return *model_; }
  AgentStore& store() { return *store_; }

 private:
  class DeferredBackend;
  ServerStack() = default;

  ServerConfig config_;
  std::unique_ptr<DeferredBackend> backend_;
  std::unique_ptr<api::Router> router_;
  std::unique_ptr<api::HttpServer> http_;
  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Context> context_;
  std::unique_ptr<AgentStore> store_;
  std::unique_ptr<RedisRemoteStore> remote_store_;  // both outlive the scheduler
  std::unique_ptr<RemoteTier> remote_tier_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  int port_ = 0;
  bool stopped_ = false;
};

}  // namespace agentkv::cli
