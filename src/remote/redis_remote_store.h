#pragma once
// RedisRemoteStore: RemoteStore on one Redis server (hiredis 0.14, Debian's).
//
// Keys (docs/remote.md), every one scoped by fingerprint and tenant:
//   agentkv:v1:<fingerprint>:<NameHash(ns)>:b:<block_id>         block file bytes (SET NX)
//   agentkv:v1:<fingerprint>:<NameHash(ns)>:m:<NameHash(agent)>  hash {v: version, m: manifest}
// The manifest compare-and-set is one Lua script (versions compared as
// unsigned decimals), so it is atomic on the server.
//
// Connections: a pool of blocking hiredis contexts, each used by one thread at
// a time; a context that saw an error is dropped and a new one is dialled on
// the next call. After a failed connect every call fails fast (Unavailable)
// for retry_after_ms, so an outage costs the caller one timeout per interval,
// not one per call. GetBlocks pipelines its GETs and spreads them over up to
// parallel_reads connections, each on its own thread.
//
// Thread safety: all methods may be called concurrently from any thread.

#include <chrono>
#include <memory>
#include <vector>

#include "remote/redis_options.h"
#include "remote/remote_store.h"
#include "util/mutex.h"

struct redisContext;

namespace agentkv {

class RedisRemoteStore : public RemoteStore {
 public:
  // Dials nothing yet: the first call connects (so a server starts while
  // Redis is down, and carries on without it). Sets SIGPIPE to ignored,
  // process-wide (hiredis writes to the socket with write(2)).
  explicit RedisRemoteStore(RedisOptions options);
  ~RedisRemoteStore() override;

  // Connects, authenticates and PINGs now: the error if that fails.
  Status Ping();

  Result<std::vector<bool>> BlocksExist(const RemoteScope& scope, std::span<const std::string> ids) override;
  Result<std::vector<std::optional<std::string>>> GetBlocks(const RemoteScope& scope,
                                                           std::span<const std::string> ids) override;
  Result<uint32_t> PutBlocksIfAbsent(const RemoteScope& scope,
                                     std::span<const std::pair<std::string, std::string_view>> blocks) override;
  Status DeleteBlocks(const RemoteScope& scope, std::span<const std::string> ids) override;
  // Lua scripts (atomic on the server); see RemoteStore and docs/remote.md.
  Status ClaimBlocks(const RemoteScope& scope, std::string_view agent_id, std::span<const std::string> ids) override;
  Result<uint32_t> ReleaseBlocks(const RemoteScope& scope, std::string_view agent_id, std::span<const std::string> keep,
                                 uint64_t if_version) override;
  Result<std::optional<RemoteManifest>> GetManifest(const RemoteScope& scope, std::string_view agent_id) override;
  Result<bool> PutManifestIfNewer(const RemoteScope& scope, std::string_view agent_id, uint64_t version,
                                  std::string_view bytes) override;
  Status DeleteManifest(const RemoteScope& scope, std::string_view agent_id) override;
  Result<std::vector<RemoteManifest>> ListManifests(const RemoteScope& scope) override;
  std::string Describe() const override;

  // The keys (tests, docs).
  static std::string ScopePrefix(const RemoteScope& scope);
  static std::string BlockKey(const RemoteScope& scope, std::string_view block_id);
  static std::string ManifestKey(const RemoteScope& scope, std::string_view agent_id);
  static std::string AgentBlocksKey(const RemoteScope& scope, std::string_view agent_id);

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

  Result<ContextPtr> Acquire();
  void Release(ContextPtr c, bool healthy);
  Result<ContextPtr> Dial();
  // Runs `argvs` pipelined on one connection; replies converted by `take`.
  template <typename T, typename Take>
  Result<std::vector<T>> Pipeline(const std::vector<std::vector<std::string_view>>& argvs, Take take);

  const RedisOptions options_;
  Mutex mu_;
  std::vector<ContextPtr> idle_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point down_until_ GUARDED_BY(mu_);  // fail fast before this
  std::string last_error_ GUARDED_BY(mu_);
};

}  // namespace agentkv
