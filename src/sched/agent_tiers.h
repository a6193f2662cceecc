#pragma once
// AgentTiers: everything about an agent outside the slots: the agent table
// (sched/agent_table.h), reads of agents and namespace indexes (and their
// landings), unsaved turns and their write-behind saves, the remote tier, the
// prompt-token cache and the read reserve. The Scheduler (the inference
// loop) keeps the slots, the waiting and active turns, batching and sampling,
// and talks to this through the small API below; results of reads come back
// as completed entries it takes (Lookup, TakeRead) once `on_read_done` woke it.
//
// Threads: reads run on the read executor, saves on the save executor,
// remote pushes on the remote-writes executor; admin calls (namespace index,
// disk sizes, erasure) on the calling HTTP thread. The methods that touch the
// store or the remote tier say so ("not on the inference thread", "HTTP
// thread"); the others never do.
//
// Thread safety: the table is the inference thread's (table(), and the
// methods that say so); one mutex (mu_) guards every map below. It is never
// held across a store or remote call, nor while `on_read_done` runs, and
// never taken under the Scheduler's mutex. The pool, the store, the remote tier and the prompt
// cache are internally synchronized.
//
// Invariants: an agent has at most one read entry (reads_by_key_), done or in
// flight; a read's result is stored only while its entry has the read's id
// (a dropped entry's result is discarded). unsaved_ holds an agent's newest
// committed turn until its save landed, so a read never sees an older
// version than the newest commit. "Version" means AgentRecord::version
// only, the agent's turn counter; the pool's clean marks use its per-Put
// generation (kv/block_pool.h).

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/backend.h"
#include "engine/tokenizer.h"
#include "kv/block_pool.h"
#include "remote/remote_tier.h"
#include "sched/io_executor.h"
#include "sched/agent_table.h"
#include "sched/metrics.h"
#include "sched/prefix_donor.h"
#include "sched/prompt_token_cache.h"
#include "sched/read_landing.h"
#include "store/agent_store.h"
#include "util/mutex.h"

namespace agentkv::engine {
class Context;
}  // namespace agentkv::engine

namespace agentkv::sched {

class SlotOwners;

// An agent read from the store (or from an unsaved turn) by the read executor.
struct AgentRead {
  uint64_t id = 0;                      // which read: a dropped one's result is discarded
  bool done = false;                    // false: in flight
  std::optional<AgentRecord> record;    // its manifest; empty: not on disk
  std::vector<PoolBlock> blocks;        // the longest valid prefix of its blocks
  bool from_disk = false;               // false: the blocks came from RAM (an unsaved turn)
  bool from_remote = false;             // some blocks came from the remote tier (and were written through)
  bool remote_manifest = false;         // the record is the remote tier's (newer than the local disk's)
  double read_ms = 0.0;                 // how long the read took
  std::shared_ptr<ReadLanding::Ticket> landing;  // from_disk: where its blocks landed, if they did
};

// The answer of AgentTiers::Lookup for an agent not in a slot or the pool.
struct ReadLookup {
  enum class Kind {
    kPosted,    // no read was there: one is posted now; keep waiting
    kInFlight,  // its read runs (`landing`, may be null: what it lands into)
    kDone,      // its read completed: `read` (blocks shared, record only when newer than asked)
  };
  Kind kind = Kind::kPosted;
  std::shared_ptr<ReadLanding::Ticket> landing;
  AgentRead read;
};

// A save's BlockProvider over `blocks` (by index, checked against the id
// asked for; Internal "<what>: block not available" otherwise). `blocks`
// must outlive it.
BlockProvider ProviderOfBlocks(const std::vector<PoolBlock>& blocks, const char* what);

class AgentTiers {
 public:
  // Not owned; all must outlive this. `store` null: no disk tier (every read
  // answers "not on disk" and nothing is saved); `remote` is used only with a
  // store. `landing` null: reads land nothing. `stream_reads`: reads stream
  // into their landing and call `on_read_done` once the manifest is in too
  // (pipelined restores). `on_read_done` runs on the read executor (or the
  // calling thread) whenever a read or namespace read completed, without mu_.
  // `agent_table_bytes`: the table's bound (AgentTable::Trim). `slots`
  // (may be null: none): who is resident, asked by BeginReadForSubmit.
  AgentTiers(BlockPool& pool, AgentStore* store, RemoteTier* remote, SchedulerMetrics& metrics,
             size_t prompt_token_cache_bytes, uint64_t agent_table_bytes, std::unique_ptr<ReadLanding> landing,
             bool stream_reads, const SlotOwners* slots, std::function<void()> on_read_done);
  ~AgentTiers();  // Flush()

  AgentTiers(const AgentTiers&) = delete;
  AgentTiers& operator=(const AgentTiers&) = delete;

  bool has_store() const { return store_ != nullptr; }
  bool has_remote() const { return remote_ != nullptr; }
  bool has_landing() const { return landing_ != nullptr; }
  // ReadLanding::WaitReserved, if there is a landing. Any thread.
  void WaitLandingReserved() const {
    if (landing_ != nullptr) landing_->WaitReserved();
  }

  // --- The agent table (inference thread) ---
  AgentTable& table() { return table_; }
  const AgentTable& table() const { return table_; }
  // Adds the agents `ns`'s index read found on disk to the table, once
  // (agents the table knows are newer than what the read saw). False if
  // that read has not completed (it is posted if not yet running).
  bool MergeNamespaceIndex(const std::string& ns);
  // Whether the table may not know `key` although it is on disk: its
  // namespace was not merged, or (a client-named agent) a remote tier may
  // hold it, or the table dropped agents of its namespace.
  bool MayBeOnDisk(const AgentKey& key, bool named) const;
  // The agent from its manifest, added to the table: nullptr and *pending
  // while its read is in flight (posted now if none; with `early`, an
  // in-flight read's manifest once read counts); nullptr alone: not on disk.
  Agent* LoadFromDisk(const AgentKey& key, bool early, bool* pending);
  // The agent a turn for `key` runs as: the table's, else (with a store,
  // when it may be on disk: MayBeOnDisk(key, named)) its manifest's
  // (LoadFromDisk with `early`). nullptr and *pending: its read is in flight
  // or it is being erased (keep waiting); nullptr alone: a new agent.
  // (agent_tiers_turn.cc)
  Agent* FindForTurn(const AgentKey& key, bool named, bool early, bool* pending);
  // A subagent's parent `key`: the table's, after its namespace's index is
  // merged, else (the table dropped some of the namespace) its manifest's.
  // nullptr and *pending: keep waiting; nullptr alone: unknown.
  Agent* FindParent(const AgentKey& key, bool* pending);
  // The idle agent of `agent`'s namespace (not `agent`) whose text shares
  // the longest prefix with `prompt`: a prefix donor (sched/prefix_donor.h),
  // described in *donor. Agents on disk are offered once the namespace's
  // index is merged; until then (its read is posted here) only those this
  // process touched: a new agent never waits for a namespace read. nullptr:
  // none. Inference thread. (agent_tiers_turn.cc)
  const Agent* FindIdleDonor(const Agent& agent, std::string_view prompt, IdleDonor* donor);
  // After a turn ended: `agent`'s slot (in `ctx`) committed (Commit): its
  // text cut to where its last token ends, its version advanced, its blocks
  // exported, except the leading ones the pool, `restored` (the blocks the
  // turn started from) or `shared_from`'s pool copy (a fork, a leader's
  // slot) already hold under the same ids. Sets agent.on_disk with a store.
  void CommitTurn(Agent& agent, const engine::Context& ctx, const std::vector<PoolBlock>& restored,
                  const std::optional<AgentKey>& shared_from);
  // After a loop iteration: trims the table (AgentTable::Trim) of agents
  // whose cache the disk holds whole (not busy, in a slot or the pool, not
  // a pending fork, no unsaved turn) and that no request in `waiting` is for.
  void TrimTable(const std::set<AgentKey>& waiting);

  // Starts the store's read threads and faults in the read reserve (the
  // block tensors of `reserve`: engine::BlockTensorSizes) on the read
  // executor; returns once done. No store: nothing. Not on the inference thread.
  void Start(const std::vector<std::pair<size_t, size_t>>& reserve);
  // Waits until every queued read, save and remote push has run. Not on the
  // inference thread.
  void Flush();
  // Blocks until every save posted so far is on disk, and pushed to the
  // remote tier if there is one.
  void FlushSaves();
  // Blocks until every save of `key` posted so far has run (landed or
  // failed). Not on the inference thread.
  void WaitForSaves(const AgentKey& key);

  // --- Reads ---
  // For a request just submitted (calling thread, not the inference thread):
  // begins `key`'s read unless it is resident, in the pool or already being
  // read, so that it overlaps the prompt's tokenization. A new agent (the
  // store's in-memory index has no manifest of it) is answered from the
  // index at once, without a queued read (only without a remote tier, where
  // it may live, and without an unsaved turn). True if a read was begun
  // (DropRead undoes it if the request is refused).
  bool BeginReadForSubmit(const AgentKey& key);
  // Drops `key`'s read entry; an in-flight read's result is then discarded.
  void DropRead(const AgentKey& key);
  // Inference thread: `key`'s read state; posts a read if there is none.
  // A done read's record is returned only when it is the remote tier's and
  // newer than `known_version` (another server advanced the agent).
  ReadLookup Lookup(const AgentKey& key, uint64_t known_version);
  // Inference thread: the manifest of an agent unknown here. Empty and
  // *pending true: its read is in flight (or posted now); with `early`, an
  // in-flight read's manifest once read (pipelined restores) counts. Empty
  // and *pending false: not on disk.
  std::optional<AgentRecord> RecordOf(const AgentKey& key, bool early, bool* pending);
  // Whether `key`'s read entry is gone or done. No wait.
  bool ReadDone(const AgentKey& key) const;
  // Waits up to `timeout` for ReadDone(key).
  bool WaitReadDone(const AgentKey& key, std::chrono::milliseconds timeout);
  // Takes `key`'s completed read out (empty if in flight or gone).
  std::optional<AgentRead> TakeRead(const AgentKey& key);
  // The previous prompt's tokens of `key` (the prompt cache, else the
  // prompt prefix of the manifest its in-flight read brings, waited for up
  // to `wait`); nullptr if neither. Any thread but the inference thread.
  std::shared_ptr<const engine::PromptTokens> PreviousPrompt(const AgentKey& key, std::chrono::milliseconds wait);
  void RememberPrompt(const AgentKey& key, std::shared_ptr<const engine::PromptTokens> prompt) {
    prompt_tokens_.Put(key, std::move(prompt));
  }
  // Another agent's last prompt in `ns` that shares the longest prefix with
  // `text`, at least kMinSharedPrefixBytes (PromptTokenCache::LongestPrefix):
  // a new agent's prompt is tokenized from it. The caller keeps isolated
  // keys' requests away (they are never seeded). Any thread.
  std::shared_ptr<const engine::PromptTokens> NamespacePrompt(const std::string& ns, std::string_view text) const {
    return prompt_tokens_.LongestPrefix(ns, text, kMinSharedPrefixBytes);
  }

  // --- Namespace indexes ---
  // Reads `ns`'s index from the store unless it was read or merged
  // (read executor or HTTP thread).
  void ReadNamespaceIndex(const std::string& ns);
  // Inference thread: the records a completed index read found, once (the
  // namespace is then merged), less agents being erased; empty and *ready
  // false: not read yet (a read is posted). Merged before: empty, ready.
  std::vector<AgentRecord> TakeNamespaceIndex(const std::string& ns, bool* ready);
  bool NamespaceMerged(const std::string& ns) const;

  // --- Residency, commits and erasure ---
  // Inference thread: a committed turn: into the pool (dirty while a store
  // must save it) and, with a store, its save queued; until the save lands
  // the turn stays in RAM (unsaved) and reads of the agent are served from
  // it. False if there is no store (nothing queued).
  bool Commit(const AgentKey& key, AgentRecord record, std::vector<PoolBlock> blocks);
  bool HasUnsaved(const AgentKey& key) const;
  // Inference thread: `key` is being erased: no read may bring it back
  // (until EndErase), its unsaved turn, read and prompt are dropped.
  void BeginErase(const AgentKey& key);
  bool Erasing(const AgentKey& key) const;
  // HTTP thread, after BeginErase: waits for its saves, erases its files
  // (when `erase_disk`) and its remote copy. NotFound only when
  // `must_exist` and the disk had no such agent.
  Status EraseStored(const AgentKey& key, bool erase_disk, bool must_exist);
  // HTTP thread: waits for `key`'s saves, then evicts its pool copy to disk.
  Status EvictToDisk(const AgentKey& key);

  // --- The disk's view (HTTP thread) ---
  void FillDiskBytes(const std::string& ns, api::AgentInfo* info);
  // Inference thread: `a` as the admin routes show it (its tier, RAM bytes;
  // a slot-only agent's at `slot_bytes_per_token`); disk_bytes: FillDiskBytes.
  api::AgentInfo InfoOf(const Agent& a, uint64_t slot_bytes_per_token) const;
  // Agents on disk the table may have dropped: their summaries (usable ones).
  std::vector<AgentSummary> DiskAgents(const std::string& ns);
  std::optional<AgentSummary> DiskAgent(const AgentKey& key);

  // Inference thread, when it has nothing to run: refills the read reserve
  // (util/warm_memory.h) on the niced save thread if reads took from it.
  void RefillReadReserveWhenIdle();
  // The tiers' gauges (unsaved agents, queued I/O, the RAM pool, the agent
  // table, the disk) and the remote tier's metrics text ("" without one).
  // Any thread.
  void FillGauges(SchedulerMetrics::Gauges* g) const;
  std::string RemoteMetricsText() const;

 private:
  uint64_t BeginRead(const AgentKey& key, std::shared_ptr<ReadLanding::Ticket> landing) REQUIRES(mu_);
  void PostRead(const AgentKey& key) REQUIRES(mu_);
  void PostNamespaceRead(const std::string& ns) REQUIRES(mu_);
  void SavePosted(const AgentKey& key) REQUIRES(mu_) { ++saves_pending_[key]; }
  void SaveRan(const AgentKey& key) REQUIRES(mu_);
  void ReadFromStoreIndex(const AgentKey& key, uint64_t read_id) EXCLUDES(mu_);
  // read executor
  AgentRead ReadAgent(const AgentKey& key, const std::shared_ptr<ReadLanding::Ticket>& landing) EXCLUDES(mu_);
  void ReadDoneNotify() EXCLUDES(mu_);
  void PostSave(const AgentKey& key, AgentRecord record, std::vector<PoolBlock> blocks, bool in_pool,
                uint64_t pool_generation);
  // Remote tier (agent_tiers_remote.cc). On a local miss (or, with
  // newer_than = the local version, a local copy another server has since
  // advanced): fetches the manifest, reads the blocks the local store holds
  // and fetches the others, fills `read` and queues a complete copy's
  // write-through. False if the remote has nothing usable (or nothing newer).
  bool ReadFromRemote(const AgentKey& key, AgentRead* read, uint64_t newer_than);  // read executor
  void PostWriteThrough(const AgentKey& key, AgentRecord record, std::vector<PoolBlock> blocks);
  void PostRemotePush(AgentRecord saved, std::shared_ptr<const void> keep_alive, std::vector<const KvBlock*> blocks);
  void NoteRemoteOutcome(const Status& s, const char* what);  // logs outage and recovery once each

  // A committed turn whose save has not landed yet (or failed).
  struct UnsavedTurn {
    struct Data {
      AgentRecord record;
      std::vector<PoolBlock> blocks;
    };
    std::shared_ptr<const Data> turn;  // shared with the save job
    uint64_t seq = 0;                  // which save owns it
  };

  BlockPool& pool_;
  AgentStore* const store_;
  RemoteTier* const remote_;
  SchedulerMetrics& metrics_;
  PromptTokenCache prompt_tokens_;
  AgentTable table_;
  const std::unique_ptr<ReadLanding> landing_;
  const bool stream_reads_;
  const SlotOwners* const slots_;
  const std::function<void()> on_read_done_;
  std::atomic<bool> remote_down_{false};            // the last remote call failed (for the log)
  std::atomic<bool> reserve_refill_posted_{false};  // a RefillReadReserveWhenIdle job is queued

  mutable Mutex mu_;
  CondVar reads_cv_;  // a read completed
  CondVar saves_cv_;  // a save ran
  std::map<AgentKey, AgentRead> reads_by_key_ GUARDED_BY(mu_);  // done or in flight
  uint64_t next_read_id_ GUARDED_BY(mu_) = 0;
  std::map<std::string, std::vector<AgentRecord>> ns_index_ GUARDED_BY(mu_);  // read, not yet merged
  std::set<std::string> ns_reading_ GUARDED_BY(mu_);
  std::set<std::string> ns_merged_ GUARDED_BY(mu_);  // merged into the table
  std::map<AgentKey, UnsavedTurn> unsaved_ GUARDED_BY(mu_);
  std::set<AgentKey> erasing_ GUARDED_BY(mu_);
  uint64_t next_save_seq_ GUARDED_BY(mu_) = 0;
  std::map<AgentKey, int> saves_pending_ GUARDED_BY(mu_);  // posted, not yet run

  // Last: destroyed first, so no job outlives the state it uses.
  IoExecutor reads_;  // agent and namespace reads, FIFO
  // Pushes to the remote tier after the local save, at nice +10. Before
  // saves_: destroyed after it, as save jobs post pushes.
  IoExecutor remote_writes_{10};
  // Write-behind saves, FIFO (one agent's saves land in order), at nice +10.
  IoExecutor saves_{10};
};

}  // namespace agentkv::sched
