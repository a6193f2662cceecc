#pragma once
// `agentkv cache ls|show|verify --remote URL`: the remote tier read without a
// model loaded (every fingerprint). Read-only: nothing is written or deleted,
// bad blocks included.

#include <string>
#include <vector>

#include "remote/remote_store.h"
#include "store/agent_record.h"
#include "store/agent_store.h"
#include "util/status.h"

namespace agentkv {

struct RemoteAgentRow {
  AgentRecord record;          // its verified manifest
  uint64_t manifest_bytes = 0;
};

struct RemoteListing {
  std::vector<RemoteAgentRow> agents;  // sorted by fingerprint, namespace, agent id
  std::vector<std::string> problems;   // manifests that failed verification, one line each
};

// Every manifest in the remote (filtered by `ns` and `agent_id` when
// non-empty), verified (checksum, names, version). The backend's error if it
// fails.
Result<RemoteListing> RemoteCacheList(RemoteStore* store, const std::string& ns, const std::string& agent_id);

// Reads and verifies every block of every listed agent (not stopping at the
// first bad one), as `cache verify` does on disk. A bad manifest is one report
// with its problem.
Result<std::vector<VerifyReport>> RemoteCacheVerify(RemoteStore* store, const std::string& ns,
                                                    const std::string& agent_id);

}  // namespace agentkv
