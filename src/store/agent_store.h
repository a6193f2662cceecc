#pragma once
// AgentStore: the disk (warm) tier. One per <cache_dir>/<fingerprint>.
//
// Layout (docs/store-format.md):
//   <cache_dir>/<fingerprint>/<NameHash(namespace)>/
//       agents/<NameHash(agent_id)>.json      one manifest per agent
//       blocks/<block_id>.safetensors          content-addressed, shared by
//                                              the namespace's agents
//       quarantine/                            bad files moved aside
// A cache made under another fingerprint lives in another directory and is
// never read; fingerprints and kv types inside manifests and blocks are
// checked too.
//
// Crash safety: blocks first (temp -> write -> fsync -> rename, then one
// fsync of blocks/), then the manifest (same sequence + fsync of agents/),
// then unreferenced blocks are deleted. A crash at any instant leaves each
// agent at its old or its new version, and every block a durable manifest
// names stays on disk. Open() removes temp files and orphan blocks.
//
// One writer per cache directory: a writable store holds an exclusive lock on
// <cache_dir>/LOCK (FileSystem::LockFile) from Open until it is destroyed, so
// a second server or `agentkv cache rm` cannot delete its files. A read-only
// store takes no lock and deletes nothing; live() says whether a writer held
// the lock when it opened.
//
// Thread safety: internally synchronized; every public method may be called
// from any thread. Calls serialize on one mutex, which guards the in-memory
// index. Reads never hold it across file I/O (as LevelDB's DBImpl unlocks
// around table reads): LoadBlocks, GetRecord and ReadHeldBlocks take what
// they need under it, read the manifest and block files without it, and
// take it again to check and account, so the index accessors (ListAgents,
// GetSummary, stats: /metrics and admin calls) answer while a load waits on
// the disk. SaveAgent does all its writes and fsyncs without it too (block
// files, the blocks directory's fsync, the manifest's temp file, fsync and
// rename; saves and DeleteAgent serialize on their own mutex). Nor do
// garbage collection's unlinks: the index drops a block at once and its file
// is removed once the save or delete releases the lock (removals_,
// RemovePendingFiles), with the blocks directory's fsync of a deletion.
// Still under it: quarantine's renames, a deletion's manifest removal and
// the agents directory's fsync (DeleteAgent, and the disk budget's evictions
// inside a save), VerifyAgent (a maintenance command: it reads every block
// file) and a dirty namespace's rescan after a failure.
//
// The in-memory index of namespaces, agents and block files is a StoreIndex
// (store_index.h: its own questions, no file work); this class keeps it in
// line with the files. Block files are read in parallel, without the lock,
// by a BlockFilesReader (block_files_reader.h: its threads, read sizes and
// read reserve; no index).
//
// Invariants (under the mutex):
//   - NamespaceState::blocks holds the block files known to be on disk; a
//     block's refs = number of agents (all, including kv-type mismatches)
//     whose manifest names it.
//   - after an operation failed part-way, the namespace is `dirty` and is
//     rescanned from disk (after an fsync of agents/) before the next use;
//     a failed save repairs its own leftovers instead, in O(its agent)
//     (RepairFailedSaveLocked), and marks the namespace dirty only when that
//     repair fails too.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/agent_record.h"
#include "store/block_file.h"
#include "store/block_files_reader.h"
#include "store/file_removals.h"
#include "store/block_read.h"
#include "store/file_system.h"
#include "store/kv_block.h"
#include "store/store_index.h"
#include "util/mutex.h"
#include "util/status.h"

namespace agentkv {

struct AgentStoreOptions {
  FileSystem* fs = nullptr;   // not owned, must outlive the store; nullptr: DefaultFileSystem()
  std::string cache_dir;      // REQUIRES: non-empty
  std::string fingerprint;    // REQUIRES: ValidateName-valid (hex in practice)
  // If non-empty, agents saved with other kv types are kept on disk but not
  // served (ListAgents shows them with usable=false) and SaveAgent refuses
  // records with other kv types.
  std::string kv_types;
  uint64_t disk_budget_bytes = 0;  // 0: unlimited; else LRU deletion of whole agents
  // 0: none; else each namespace's (tenant's) manifests and block files are
  // kept under this by deleting that namespace's least recently used agents
  // first (a save never evicts the agent it saves), so one tenant cannot
  // push the others out of a shared disk budget. Applied before
  // disk_budget_bytes, at each save (the saving namespace) and at Open (all).
  uint64_t disk_budget_per_ns_bytes = 0;
  // No file is created, deleted, moved or written; Save/Delete fail with
  // FailedPrecondition; bad files are reported but not quarantined.
  bool read_only = false;
  std::function<int64_t()> now_ms;  // wall clock in ms; nullptr: system clock
  // How LoadBlocks reads an agent's block files when fs->ConcurrentReads()
  // (block_read.h ReadBlockFiles): reads in flight (0: twice the cores, 8 to
  // 32) and the size of each data read (unset: BlockReadChunkBytes of the
  // agent's bytes; 0: one read per file; else that size). Benchmarks vary
  // them; the defaults are measured (bench/RESULTS.md).
  int read_threads = 0;
  std::optional<size_t> read_chunk_bytes;
};

// Supplies block `index` (id `block_id`) of the agent being saved; called only
// for blocks not already on disk. The block must have that index and the
// n_tokens its tokens imply. Called from within SaveAgent only, on its thread
// (with or without the store's mutex held): it must not call back into the store.
using BlockProvider = std::function<Result<KvBlock>(uint32_t index, const std::string& block_id)>;

struct SaveResult {
  AgentRecord record;           // as persisted (blocks, timestamps filled)
  uint32_t blocks_written = 0;
  uint64_t bytes_written = 0;   // block files + manifest
  uint32_t blocks_deleted = 0;  // blocks no longer referenced by anyone
  uint32_t agents_evicted = 0;  // by the disk budget
};

struct LoadedAgent {
  AgentRecord record;
  std::vector<KvBlock> blocks;  // blocks [first_block, first_block + blocks.size())
  // Tokens covered by blocks [0, first_block + blocks.size()): the longest
  // valid prefix (the caller prefills the rest).
  uint32_t valid_tokens = 0;
  bool complete = false;        // every block loaded
  Status stop_reason;           // why loading stopped early; OK if complete
};

// Watches an AgentStore::LoadBlocks while it runs, on its threads: e.g. the
// scheduler copies each block's rows into a restore buffer while the other
// block files are still being read (sched/read_landing.h).
class LoadObserver {
 public:
  virtual ~LoadObserver() = default;
  // Once, before any block file is read: the blocks the load will read ahead
  // (the store's index of the agent), blocks[k] being block first + k. The
  // manifest, read meanwhile, decides which of them the result keeps.
  virtual void OnPlan(uint32_t first, std::span<const BlockRef> blocks) = 0;
  // Block `index` of the plan was read in full and its checksum verified. It
  // is not yet checked against the manifest: only the blocks of the result
  // are good. Concurrent calls for different indexes, on reader threads;
  // none after LoadBlocks returns.
  virtual void OnBlockRead(uint32_t index, const KvBlock& block) = 0;
  // Streaming observers (OnPlan decided to stream; e.g. a restore that runs
  // beside the read): the files' data is handed out by offset (every
  // block's first bytes, then every block's next: the same layer's rows of
  // all blocks come in together), and OnDataRead reports each range of
  // block `index`'s data section [begin, end) as it lands in `layout`'s
  // tensors, before the file's checksum is checked (OnBlockRead follows
  // when it passed). Reader threads, concurrently. Default: no streaming.
  virtual bool Streams() const { return false; }
  virtual void OnDataRead(uint32_t index, const BlockFileLayout& layout, uint64_t begin, uint64_t end) {}
  // The manifest, once read (before the block files are all in), when it
  // read; the result's record is this one.
  virtual void OnRecord(const AgentRecord& record) {}
};

struct VerifyReport {
  std::string ns;
  std::string agent_id;
  uint32_t n_tokens = 0;
  uint32_t n_blocks = 0;
  uint32_t n_ok = 0;
  uint32_t n_missing = 0;
  uint32_t n_corrupt = 0;
  uint32_t valid_tokens = 0;        // longest valid prefix
  std::vector<std::string> problems;  // one line per bad block / manifest
  bool ok() const { return problems.empty(); }
};

struct StoreStats {
  uint64_t agents = 0;
  uint64_t block_files = 0;
  uint64_t disk_bytes = 0;         // manifests + block files (quarantine excluded)
  uint64_t corrupt_blocks = 0;     // failed verification on load/verify
  uint64_t corrupt_manifests = 0;
  uint64_t missing_blocks = 0;     // named by a manifest, file absent
  uint64_t quarantined_files = 0;
  uint64_t blocks_written = 0;
  uint64_t block_bytes_written = 0;
  uint64_t manifests_written = 0;
  uint64_t orphan_blocks_removed = 0;
  uint64_t temp_files_removed = 0;
  uint64_t agents_evicted = 0;             // by the disk budget or for space (below)
  uint64_t agents_evicted_for_space = 0;   // to make room after a save failed with ENOSPC
  uint64_t saves_out_of_space = 0;         // save attempts that failed with ENOSPC / EDQUOT
};

// <cache_dir>/LOCK: the file whose lock a writable store holds.
std::string CacheLockPath(const std::string& cache_dir);

class AgentStore {
 public:
  // Scans <cache_dir>/<fingerprint>: verifies every manifest (bad ones are
  // quarantined), removes temp files and orphan blocks, fsyncs, builds the
  // index of warm agents without reading block data, applies the budget.
  // InvalidArgument for a bad fingerprint (before any file work); IOError if
  // the directory cannot be created or listed.
  // Unless read_only, first takes the cache directory's lock:
  // FailedPrecondition if another store (any process) holds it.
  static Result<std::unique_ptr<AgentStore>> Open(AgentStoreOptions options);

  AgentStore(const AgentStore&) = delete;
  AgentStore& operator=(const AgentStore&) = delete;
  ~AgentStore();

  // Every namespace and agent id argument is validated (ValidateName) before
  // any file work: InvalidArgument.

  // Namespaces that hold at least one agent, sorted.
  std::vector<std::string> ListNamespaces();
  // Agents of `ns` sorted by id (empty if the namespace is unknown).
  Result<std::vector<AgentSummary>> ListAgents(std::string_view ns);
  // NotFound if absent.
  Result<AgentSummary> GetSummary(std::string_view ns, std::string_view agent_id);
  // The agent's manifest, read and verified now. NotFound if absent;
  // FailedPrecondition if its kv types differ; Corruption (and the manifest
  // is quarantined) if it no longer verifies.
  Result<AgentRecord> GetRecord(std::string_view ns, std::string_view agent_id);

  // Persists `record` (its agent_id, text, tokens, spans, kv_types,
  // layout_version; ns, fingerprint, blocks and timestamps are set here) with
  // the KV of blocks not yet on disk taken from `provider`, then deletes
  // blocks no longer referenced and applies the disk budget (never evicting
  // this agent). InvalidArgument for a bad record or mismatching
  // ns/fingerprint/kv types; provider errors and IOError are returned as is.
  // On failure the agent is at its old version (or, if the failure came after
  // the manifest's rename, possibly at the new one), never a mix.
  // Versions never go backwards: FailedPrecondition ("stale save"), with no
  // file touched, if record.version is lower than the version on disk, or
  // equal to it with other content (text, tokens, spans, kv types, layout).
  // record.version 0 is replaced by on-disk version + 1 (no check).
  // res.record.version is the version written.
  // Out of space (IsNoSpace: ENOSPC, EDQUOT): the least recently used other
  // agent is evicted (whole) and the save tried again, until it fits or no
  // other agent is left (then the IOError is returned); res.agents_evicted
  // counts these evictions too. So a disk smaller than the budget (or no
  // budget) fills up to what it holds and keeps the most recently used agents.
  Result<SaveResult> SaveAgent(std::string_view ns, const AgentRecord& record, const BlockProvider& provider);

  // Reads and verifies blocks [first_block, n_blocks) and stops at the first
  // missing or bad one: a bad block file is quarantined and counted. NotFound
  // if the agent is absent, FailedPrecondition if its kv types differ,
  // Corruption if its manifest no longer verifies; a bad block is not an
  // error (see LoadedAgent). `observer` (may be null) sees the read as it
  // goes; it is told nothing when the file system cannot read concurrently.
  // A save or erasure of the same agent while it reads (the files are read
  // without the lock): erased by the time the read ends (DeleteAgent, the
  // disk budget), NotFound, even if every file was read; saved again, the
  // result is the version whose manifest was read, up to the first of its
  // blocks that the save's garbage collection removed meanwhile (stop_reason
  // Unavailable): a block that went missing or failed its checks while
  // manifests changed is neither counted nor quarantined (the next load
  // checks it again), so a race is never taken for a damaged cache.
  Result<LoadedAgent> LoadBlocks(std::string_view ns, std::string_view agent_id, uint32_t first_block = 0,
                                 LoadObserver* observer = nullptr);
  // Starts the threads LoadBlocks reads with when called on this thread
  // (they are kept: util/parallel.h's WorkerTeam), so that the first load
  // after a start does not pay for starting them. Optional. Then, unless
  // empty, runs on_each_reader(i, n) on each of the n reader threads (the
  // caller's thread when the file system reads on one) and returns when all
  // have: e.g. the scheduler fills read_reserve() there.
  void StartReadThreads(const std::function<void(size_t reader, size_t n_readers)>& on_each_reader = {});
  // The reserve of faulted-in buffers this store's block reads take their
  // tensors' memory from (util/warm_memory.h; empty until someone sets its
  // targets, e.g. the scheduler's --read-reserve). Thread-safe; lives as long
  // as the store or the last tensor read into its buffers.
  WarmMemory& read_reserve() const { return reader_.reserve(); }

  // The blocks of `rec` (agent `rec.agent_id` of `ns` as another tier,
  // e.g. the remote, holds it) that this store holds a file of, by block id:
  // held[i] is block i, read and verified as a load verifies it
  // (CheckBlockBelongs against `rec`; a bad file is quarantined and counted),
  // or nullopt where no file of that id is here or it could not be used.
  // Files are read in parallel, without the store's lock; ids not held are
  // not touched. The agent's own manifest here is neither read nor changed.
  // held.size() == rec.blocks.size(). InvalidArgument for a bad namespace.
  Result<std::vector<std::optional<KvBlock>>> ReadHeldBlocks(std::string_view ns, const AgentRecord& rec);

  // Erasure: removes the manifest, then every block no one else references
  // and their quarantined copies; all durably. NotFound if absent.
  Status DeleteAgent(std::string_view ns, std::string_view agent_id);

  // Reads and verifies every block (not stopping at the first bad one); bad
  // ones are quarantined unless read_only. NotFound if absent.
  Result<VerifyReport> VerifyAgent(std::string_view ns, std::string_view agent_id);

  StoreStats stats();
  // Read-only stores: whether a writer (a running server) held the cache
  // directory's lock at Open, so that what is read may change meanwhile.
  // Always false for a writable store (it holds the lock itself).
  bool live() const { return live_; }
  const std::string& fingerprint() const { return options_.fingerprint; }
  // <cache_dir>/<fingerprint>
  const std::string& root_dir() const { return root_; }

 private:
  // Both names valid (ValidateName): every public call that names an agent checks them first.
  static Status ValidateIds(std::string_view ns, std::string_view agent_id);
  // The in-memory index (store_index.h), under mu_.
  using BlockState = StoreIndex::Block;
  using AgentState = StoreIndex::Agent;
  using NamespaceState = StoreIndex::Namespace;
  struct WrittenBlock {
    std::string id;
    uint64_t checksum = 0;
    uint64_t file_bytes = 0;
  };

  explicit AgentStore(AgentStoreOptions options);

  // agent_store_scan.cc
  Status ScanAllLocked() REQUIRES(mu_);
  // Rebuilds `ns` from disk. Unless read_only: first fsyncs agents/ (so the
  // durable state equals what is seen), then removes temp files, orphan
  // blocks and quarantines bad manifests.
  Status ScanNamespaceLocked(NamespaceState* ns) REQUIRES(mu_);
  Status CleanIfDirtyLocked(NamespaceState* ns) REQUIRES(mu_);
  // Moves a bad file into quarantine/ (or deletes it if that fails).
  void QuarantineLocked(NamespaceState* ns, const std::string& path) REQUIRES(mu_);
  // Takes blocks with refs == 0 out of the index and queues their files for
  // removal (RemovePendingFiles; erasure: blocks/ fsynced after it). Returns
  // how many were queued.
  uint32_t CollectGarbageLocked(NamespaceState* ns, bool erasure = false) REQUIRES(mu_);
  // Removes the files queued in removals_ (file_removals.h), without mu_ while it
  // unlinks and fsyncs (loads, listings and /metrics go on meanwhile); `l`
  // holds mu_ on entry and again on return. A failed removal marks its
  // namespace dirty (the rescan retries it); the first failure of an
  // erasure (a removal whose directory must be fsynced) is returned in
  // *erasure if set. Returns the block files removed.
  uint32_t RemovePendingFiles(MutexLock& l, Status* erasure = nullptr) REQUIRES(mu_, save_mu_);
  Status EnforceBudgetLocked(const NamespaceState* keep_ns, std::string_view keep_id, uint32_t* evicted) REQUIRES(mu_);
  // disk_budget_per_ns_bytes for one namespace.
  Status EnforceNamespaceBudgetLocked(NamespaceState* ns, std::string_view keep_id, uint32_t* evicted) REQUIRES(mu_);
  // After a save ran out of space: rescans dirty namespaces (removing what
  // failed saves left) and deletes the least recently used agent other than
  // keep_id. false if there was none to delete.
  Result<bool> EvictForSpaceLocked(std::string_view keep_ns, std::string_view keep_id) REQUIRES(mu_);
  // Removes the agent's manifest (durably) and takes it out of the index; the
  // blocks only it named are queued: the caller runs RemovePendingFiles.
  Status DeleteAgentLocked(NamespaceState* ns, const std::string& agent_id) REQUIRES(mu_);
  // The state a scan derives from an agent's manifest (usable: its kv types are the store's).
  AgentState StateOfManifest(const AgentRecord& rec, uint64_t manifest_bytes) const;

  // save_repair.cc. After SaveAgentOnce failed part-way (mu_ and save_mu_
  // held): brings `ns` back in line with the disk for `agent_id`
  // (block ids `ids`), or marks it dirty if it cannot.
  void RepairFailedSaveLocked(NamespaceState* ns, const std::string& agent_id, const std::vector<std::string>& ids)
      REQUIRES(mu_, save_mu_);

  // agent_store.cc
  // One attempt of SaveAgent on a validated record (ns and fingerprint set,
  // blocks empty); `ids` are its block ids.
  Result<SaveResult> SaveAgentOnce(AgentRecord rec, const std::vector<std::string>& ids,
                                   const BlockProvider& provider);
  // Gets block i of `rec` from the provider and writes its file durably
  // (not its directory entry). Touches no store state: callable without mu_
  // (ns.dir is immutable).
  Result<WrittenBlock> WriteBlockFile(const NamespaceState& ns, const AgentRecord& rec,
                                      const std::vector<std::string>& ids, uint32_t i, const BlockProvider& provider);
  // SaveAgent's version rule (see there): OK, and rec->version set, if `rec`
  // may replace what `ns` holds for its agent.
  Status CheckNotStaleLocked(NamespaceState* ns, AgentRecord* rec) REQUIRES(mu_);
  Result<NamespaceState*> PrepareLocked(std::string_view ns) REQUIRES(mu_);  // find + clean if dirty
  // The agent's manifest, read and checked under the lock (the admin paths
  // and saves): CheckReadableLocked, then the file, then DecodeRecordLocked.
  Result<AgentRecord> ReadRecordLocked(NamespaceState* ns, const std::string& agent_id) REQUIRES(mu_);
  // NotFound if the index holds no such agent, FailedPrecondition if its kv
  // types differ; else OK: its manifest may be read.
  Status CheckReadableLocked(const NamespaceState& ns, const std::string& agent_id) const REQUIRES(mu_);
  // The record in `bytes` (the manifest file's content, or why it could not
  // be read): a bad one is quarantined and the namespace marked dirty, a
  // vanished file marks it dirty. `stamp`: the file was read without the lock
  // and manifest_changes_ was *stamp before; if a manifest was written or
  // removed since, nothing is quarantined or marked: the result is a
  // record of this agent that decodes, else NotFound (erased) or Unavailable.
  Result<AgentRecord> DecodeRecordLocked(NamespaceState* ns, const std::string& agent_id,
                                         Result<std::string> bytes, std::optional<uint64_t> stamp) REQUIRES(mu_);
  // Reads and decodes block i of `rec` and checks it belongs there; a
  // corrupt file is quarantined. `read` is the block file already read and
  // decoded by a read-ahead task, or empty to do it here.
  Result<KvBlock> ReadBlockLocked(NamespaceState* ns, const AgentRecord& rec, uint32_t i,
                                  std::optional<Result<DecodedBlock>> read = std::nullopt) REQUIRES(mu_);
  int64_t NowMs() const;
  std::string AgentsDir(const NamespaceState& ns) const { return ns.dir + "/agents"; }
  std::string BlocksDir(const NamespaceState& ns) const { return ns.dir + "/blocks"; }
  std::string QuarantineDir(const NamespaceState& ns) const { return ns.dir + "/quarantine"; }
  std::string ManifestPath(const NamespaceState& ns, std::string_view agent_id) const;
  std::string BlockPath(const NamespaceState& ns, std::string_view block_id) const;

  const AgentStoreOptions options_;
  FileSystem* const fs_;
  // Reads block files without mu_ (its threads, read sizes and reserve).
  const BlockFilesReader reader_;
  const std::string root_;
  std::unique_ptr<FileLock> lock_;  // writable stores: <cache_dir>/LOCK, released last
  bool live_ = false;               // set by Open, then constant

  Mutex save_mu_;  // serializes SaveAgent and DeleteAgent (held without mu_ while a save writes)
  Mutex mu_;
  StoreIndex index_ GUARDED_BY(mu_);
  // Files already out of the index, to be removed from disk by
  // RemovePendingFiles without mu_. Only saves and deletes queue them, and
  // they are serialized (save_mu_): a save removes the queue before it
  // writes a block file, so a queued removal never hits a block written
  // anew under the same (content-addressed) id.
  FileRemovals removals_ GUARDED_BY(mu_);
  StoreStats stats_ GUARDED_BY(mu_);  // counters only
  uint64_t quarantine_seq_ GUARDED_BY(mu_) = 0;
  // Manifest writes and removals begun (a save, an erasure): a read done
  // without the lock checks it to tell a change made meanwhile from a fault
  // of the files (DecodeRecordLocked, LoadBlocks).
  uint64_t manifest_changes_ GUARDED_BY(mu_) = 0;
};

}  // namespace agentkv
