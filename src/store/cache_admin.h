#pragma once
// Library side of `agentkv cache ls|show|verify|rm`: whole-cache operations
// over every model fingerprint under a cache directory, for a CLI that has no
// model loaded. Each fingerprint directory is opened as an AgentStore
// (read-only for ls/show and for verify without repair).
//
// A running server holds the lock on <cache_dir>/LOCK (agent_store.h).
// ls/show/verify open the cache read-only (no file is created, deleted or
// moved) and may run beside it; CacheInUse tells the CLI to say so. rm and
// verify --repair need the lock: FailedPrecondition while a server holds it.
// Thread-compatible.

#include <string>
#include <vector>

#include "store/agent_store.h"
#include "store/file_system.h"

namespace agentkv {

struct CacheQuery {
  FileSystem* fs = nullptr;  // nullptr: DefaultFileSystem()
  std::string cache_dir;     // REQUIRES: non-empty
  std::string ns;            // "" = every namespace
  std::string agent_id;      // "" = every agent (ls/verify); required by show/rm
};

struct CacheAgentRow {
  std::string fingerprint;
  AgentSummary summary;
};

struct CacheAgentDetail {
  std::string fingerprint;
  AgentSummary summary;
  AgentRecord record;
};

struct CacheVerifyRow {
  std::string fingerprint;
  VerifyReport report;
};

// Model fingerprint directories under cache_dir (sorted; others ignored).
Result<std::vector<std::string>> ListCacheFingerprints(FileSystem* fs, const std::string& cache_dir);

// Whether another process (a running server) holds cache_dir's lock now.
Result<bool> CacheInUse(FileSystem* fs, const std::string& cache_dir);

// `cache ls`: agents matching the query, sorted by fingerprint, ns, id.
Result<std::vector<CacheAgentRow>> CacheList(const CacheQuery& q);

// `cache show`: every match of agent_id (one per fingerprint/namespace).
// NotFound if none. InvalidArgument for a bad id.
Result<std::vector<CacheAgentDetail>> CacheShow(const CacheQuery& q);

// `cache verify`: reads every block of the matching agents. With `repair`,
// bad files are quarantined (the store is opened writable, which needs the
// lock: FailedPrecondition while a server runs).
Result<std::vector<CacheVerifyRow>> CacheVerify(const CacheQuery& q, bool repair);

// `cache rm`: erases the matching agents (agent_id required). Returns how many
// were removed; NotFound if none matched; FailedPrecondition while a server
// holds the lock (erase through its API instead: DELETE /v1/agents/<id>).
Result<size_t> CacheRemove(const CacheQuery& q);

}  // namespace agentkv
