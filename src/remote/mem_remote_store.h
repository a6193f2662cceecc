#pragma once
// MemRemoteStore: a RemoteStore in process memory, for tests (the scheduler's
// and anything above it) that need a remote tier without a Redis server. Same
// contract as RedisRemoteStore, including per-scope keys and the manifest
// compare-and-set; SetAvailable(false) makes every call fail with
// Unavailable, as during an outage.
//
// Thread safety: internally synchronized.

#include <atomic>
#include <map>
#include <set>

#include "remote/remote_store.h"
#include "util/mutex.h"

namespace agentkv {

class MemRemoteStore : public RemoteStore {
 public:
  void SetAvailable(bool available) { available_ = available; }
  // Calls made so far (any outcome).
  uint64_t calls() const { return calls_.load(); }
  // Block ids GetBlocks was asked for so far (present or not).
  uint64_t blocks_requested() const { return blocks_requested_.load(); }

  Result<std::vector<bool>> BlocksExist(const RemoteScope& scope, std::span<const std::string> ids) override;
  Result<std::vector<std::optional<std::string>>> GetBlocks(const RemoteScope& scope,
                                                           std::span<const std::string> ids) override;
  Result<uint32_t> PutBlocksIfAbsent(const RemoteScope& scope,
                                     std::span<const std::pair<std::string, std::string_view>> blocks) override;
  Status DeleteBlocks(const RemoteScope& scope, std::span<const std::string> ids) override;
  Status ClaimBlocks(const RemoteScope& scope, std::string_view agent_id, std::span<const std::string> ids) override;
  Result<uint32_t> ReleaseBlocks(const RemoteScope& scope, std::string_view agent_id, std::span<const std::string> keep,
                                 uint64_t if_version) override;
  // Blocks stored, over every scope (tests: nothing leaks).
  size_t block_count() {
    MutexLock l(&mu_);
    return blocks_.size();
  }
  Result<std::optional<RemoteManifest>> GetManifest(const RemoteScope& scope, std::string_view agent_id) override;
  Result<bool> PutManifestIfNewer(const RemoteScope& scope, std::string_view agent_id, uint64_t version,
                                  std::string_view bytes) override;
  Status DeleteManifest(const RemoteScope& scope, std::string_view agent_id) override;
  Result<std::vector<RemoteManifest>> ListManifests(const RemoteScope& scope) override;
  std::string Describe() const override { return "mem://"; }

 private:
  Status Enter(const char* op);  // counts, notes the access, fails if unavailable
  static std::string Key(const RemoteScope& scope, std::string_view name);

  std::atomic<bool> available_{true};
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> blocks_requested_{0};
  Mutex mu_;
  std::map<std::string, std::string> blocks_ GUARDED_BY(mu_);
  std::map<std::string, RemoteManifest> manifests_ GUARDED_BY(mu_);
  // Key(scope, agent) -> its claimed block ids; Key(scope, block) -> agents.
  std::map<std::string, std::set<std::string>> agent_blocks_ GUARDED_BY(mu_);
  std::map<std::string, std::set<std::string>> block_agents_ GUARDED_BY(mu_);
};

}  // namespace agentkv
