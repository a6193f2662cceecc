#pragma once
// RemoteTier: an agent's cache to and from a RemoteStore (docs/remote.md).
// Owns the rules, not the transport: what is fetched is verified here (the
// manifest's checksum, names, fingerprint and version; every block's checksum
// and place in the chain, store/block_belongs.h), and a fetch stops at the
// first missing or bad block, returning the longest valid prefix, exactly as
// a disk load does. Nothing unverified leaves Fetch; a bad block is deleted
// from the remote (as the disk tier quarantines it), so the next push of an
// agent naming it uploads it again.
//
// Thread safety: Fetch/Push/Delete may run concurrently on any threads (the
// scheduler calls them on its I/O executors, never on the inference thread);
// the counters are atomics.

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "remote/remote_store.h"
#include "store/agent_record.h"
#include "store/agent_store.h"
#include "store/block_file.h"
#include "store/kv_block.h"
#include "util/status.h"

namespace agentkv {

struct RemoteTierCounters {
  std::atomic<uint64_t> hits{0};            // fetches that found a usable manifest
  std::atomic<uint64_t> misses{0};          // fetches that found no manifest
  std::atomic<uint64_t> errors{0};          // calls the backend failed (outage, timeout, error reply)
  std::atomic<uint64_t> corrupt_blocks{0};  // fetched blocks that failed verification (never imported)
  std::atomic<uint64_t> corrupt_manifests{0};
  std::atomic<uint64_t> missing_blocks{0};  // named by a manifest, absent (evicted)
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> blocks_written{0};
  std::atomic<uint64_t> blocks_deleted{0};  // no agent claims them any more (docs/remote.md, "Deletes")
  std::atomic<uint64_t> manifests_written{0};
  std::atomic<uint64_t> stale_manifests{0};  // pushes refused: a newer version was there
  // Blocks of a fetched manifest the caller already held (its local disk):
  // taken from there, never fetched.
  std::atomic<uint64_t> local_blocks{0};
};

// FetchBlocks' outcome: the load, and how many of its blocks came from the
// remote (the others were the caller's).
struct RemoteFetch {
  LoadedAgent loaded;
  uint32_t remote_blocks = 0;
};

// Verifies fetched block `i` of `rec` (absent: nullopt): NotFound if absent;
// Corruption if it fails its own checks, does not belong at i of rec under
// `fingerprint` (store/block_belongs.h) or its checksum differs from the
// manifest's. Pure.
Result<DecodedBlock> VerifyRemoteBlock(const std::optional<std::string>& bytes, const AgentRecord& rec, uint32_t i,
                                       std::string_view fingerprint);

class RemoteTier {
 public:
  // `store` not owned, must outlive the tier. kv_types: the engine's; a remote
  // manifest with other kv types is not served.
  // repair: a bad block fetched is deleted from the remote (false for
  // read-only tools).
  RemoteTier(RemoteStore* store, std::string fingerprint, std::string kv_types, bool repair = true);

  // The agent's newest remote manifest and the longest valid prefix of its
  // blocks (LoadedAgent's contract, store/agent_store.h): FetchManifest, then
  // FetchBlocks with nothing held.
  Result<LoadedAgent> Fetch(std::string_view ns, std::string_view agent_id, uint64_t newer_than = 0);

  // The agent's newest remote manifest, verified (names, fingerprint,
  // version). NotFound if the remote holds no manifest (or one for other kv
  // types); Corruption if it fails verification; Unavailable/IOError if the
  // backend failed. newer_than > 0: AlreadyExists, after one manifest read,
  // unless the remote version is greater (a local copy is as new).
  Result<AgentRecord> FetchManifest(std::string_view ns, std::string_view agent_id, uint64_t newer_than = 0);

  // The longest valid prefix of the blocks of `rec` (from FetchManifest):
  // block i is held[i] where the caller has it (already verified by it, e.g.
  // read from its disk; held may be shorter than rec.blocks or empty), else
  // fetched (one pipelined GetBlocks for all of them) and verified
  // (VerifyRemoteBlock). Stops at the first missing or bad block, a bad one
  // being deleted from the remote if repair. Unavailable/IOError if the
  // backend failed (nothing is served then). bytes_read counts only what
  // was fetched.
  Result<RemoteFetch> FetchBlocks(const AgentRecord& rec, std::vector<std::optional<KvBlock>> held = {});

  // Publishes a turn the local store saved: `saved` as SaveAgent returned it
  // (blocks, checksums and version filled) and blocks[i] its i-th block's KV.
  // Uploads the blocks the remote lacks (SET NX), then the manifest if its
  // version is newer than the remote's. A newer remote version is not an error
  // (counted in stale_manifests). REQUIRES blocks.size() == saved.blocks.size().
  Status Push(const AgentRecord& saved, const std::vector<const KvBlock*>& blocks);

  // Erasure: the agent's manifest and its blocks (another agent of the
  // namespace sharing one re-uploads it at its next save).
  Status Delete(std::string_view ns, std::string_view agent_id);

  const RemoteTierCounters& counters() const { return counters_; }
  RemoteStore* store() const { return store_; }
  // Prometheus text of the counters (agentkv_remote_*).
  std::string RenderMetrics() const;

 private:
  RemoteScope Scope(std::string_view ns) const { return {fingerprint_, std::string(ns)}; }
  Status CountError(Status s);  // counts backend failures, passes s through

  RemoteStore* const store_;
  const std::string fingerprint_;
  const std::string kv_types_;
  const bool repair_;
  RemoteTierCounters counters_;
};

}  // namespace agentkv
