#pragma once
// RemoteStore: the remote tier's storage, below the local disk (docs/remote.md).
// It holds two kinds of values, both as opaque bytes in the formats of
// docs/store-format.md:
//   - blocks: immutable and content-addressed (a block file, named by its
//     block id). Written only if absent, never rewritten.
//   - manifests: one per agent, with a monotonic version; replaced only by a
//     strictly newer version, so two servers that briefly both served an agent
//     cannot move it backwards.
// Every key is scoped by the model fingerprint and the namespace (tenant):
// nothing one scope stores can be read through another.
//
// The store does not verify bytes; its caller (RemoteTier) checks every block
// and manifest after each fetch. Errors: Unavailable when the backend cannot
// be reached (the caller carries on without it), IOError for any other
// backend failure. Thread safety: implementations are safe to call from any
// thread concurrently.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace agentkv {

// Which fingerprint and namespace every key of one call belongs to.
// REQUIRES: both ValidateName-valid (store/store_ids.h).
struct RemoteScope {
  std::string fingerprint;
  std::string ns;
};

struct RemoteManifest {
  uint64_t version = 0;
  std::string bytes;  // the manifest document (store/manifest.h)
};

class RemoteStore {
 public:
  virtual ~RemoteStore() = default;

  // Whether each block is stored, in the order of `ids`.
  virtual Result<std::vector<bool>> BlocksExist(const RemoteScope& scope, std::span<const std::string> ids) = 0;
  // Each block's bytes, or nullopt where absent, in the order of `ids`.
  virtual Result<std::vector<std::optional<std::string>>> GetBlocks(const RemoteScope& scope,
                                                                   std::span<const std::string> ids) = 0;
  // Stores each (id, bytes) whose id is absent; an id already present keeps its
  // bytes. Returns how many were written.
  virtual Result<uint32_t> PutBlocksIfAbsent(const RemoteScope& scope,
                                             std::span<const std::pair<std::string, std::string_view>> blocks) = 0;
  virtual Status DeleteBlocks(const RemoteScope& scope, std::span<const std::string> ids) = 0;

  // Block ownership (docs/remote.md, "Deletes"). Blocks are shared by every
  // agent of a scope that names them, so each agent holds a claim on the
  // blocks it pushed: the store keeps, per agent, the set of its blocks and,
  // per block, the set of agents claiming it. A block no agent claims is
  // deleted by the ReleaseBlocks that drops its last claim.
  //
  // Adds `agent_id`'s claim on each of `ids` (atomically). A push claims its
  // blocks before it checks which exist, so that no concurrent release can
  // delete a block it then skips uploading.
  virtual Status ClaimBlocks(const RemoteScope& scope, std::string_view agent_id, std::span<const std::string> ids) = 0;
  // Drops `agent_id`'s claim on every block it claims that is not in `keep`,
  // deleting each block left with no claim; returns how many were deleted.
  // If `if_version` > 0 this is done only while the agent's stored manifest
  // has exactly that version (else nothing changes and 0 is returned: a newer
  // push, perhaps by another server, has its own blocks to keep and releases
  // the rest itself). Atomic.
  virtual Result<uint32_t> ReleaseBlocks(const RemoteScope& scope, std::string_view agent_id,
                                         std::span<const std::string> keep, uint64_t if_version) = 0;

  // nullopt if the agent has no manifest.
  virtual Result<std::optional<RemoteManifest>> GetManifest(const RemoteScope& scope, std::string_view agent_id) = 0;
  // Atomically replaces the agent's manifest if `version` is greater than the
  // stored one (or none is stored). Returns false, changing nothing, if the
  // stored version is equal or greater.
  virtual Result<bool> PutManifestIfNewer(const RemoteScope& scope, std::string_view agent_id, uint64_t version,
                                          std::string_view bytes) = 0;
  virtual Status DeleteManifest(const RemoteScope& scope, std::string_view agent_id) = 0;
  // Every manifest of the scope (admin listing; a SCAN, may be slow). An
  // empty fingerprint or ns matches every one (admin tools without a model).
  virtual Result<std::vector<RemoteManifest>> ListManifests(const RemoteScope& scope) = 0;

  // "redis://host:port/db" without the password, for logs.
  virtual std::string Describe() const = 0;
};

}  // namespace agentkv
