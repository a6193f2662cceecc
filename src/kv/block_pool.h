#pragma once
// BlockPool: the hot tier. Agents' KV blocks in RAM, within a byte budget,
// with LRU eviction over agents and write-before-drop persistence.
//
// Model. A block is identified by (namespace, block id); ids are content
// addresses chosen by the caller (issue #3: hash chain of parent id, token ids
// and model fingerprint), so equal ids mean equal bytes. A block is stored once
// per namespace and reference-counted by the agents that list it; blocks are
// never shared across namespaces. An agent (namespace, agent id) owns an
// ordered list of block ids plus: last use, pin count, dirty flag (it has
// blocks the disk may not have) and a version that changes on every Put.
//
// Accounting. Each stored block is charged payload_bytes() + kBlockOverheadBytes
// (the fixed part approximates the KvBlock/KvTensor headers, the shared_ptr
// control block, the map node and the id string; tensor names are not counted
// separately). A block shared by N agents is charged once. Blocks handed out
// by Get() stay alive while the caller holds them even after eviction; that
// memory is not charged, so callers hold them only briefly.
//
// Eviction. When a Put would exceed the budget, the least recently used agent
// that is not pinned (and not the one being Put) is evicted: if dirty, the
// persist callback is called first and the agent is dropped only if it returns
// OK; a clean agent is dropped at once. Dropping an agent releases its block
// references; blocks still listed by other agents stay. This repeats until the
// Put fits. Eviction never loses data and ResourceExhausted is returned only
// when no candidate is left.
//
// Thread safety. Internally synchronized by one mutex; every method may be
// called from any thread (the inference thread and the I/O thread both do).
// The persist callback and the eviction observer are always called WITHOUT the
// mutex held, on the thread whose call triggered them, so they may call back
// into the pool. During a persist call the agent is pinned (not evictable, not
// erasable); other threads may still Put it: the pool compares versions after
// the callback and marks the agent clean / drops it only if it did not change.
// A Put that evicts a dirty agent therefore blocks its caller for the disk
// write; the scheduler should keep agents clean through write-behind saves
// (MarkClean) on the I/O thread, or call EvictDownTo there, so the inference
// thread's Puts normally only drop clean agents.
//
// Invariants (whenever the mutex is free):
//   used_bytes() <= budget_bytes();
//   used_bytes() == sum of charge over stored blocks;
//   a block's refcount == number of agents listing it, and every stored block
//   has refcount >= 1; every id an agent lists is stored in its namespace;
//   an agent's block list has no duplicate ids.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "store/kv_block.h"
#include "util/status.h"

namespace agentkv {

// Fixed per-block charge on top of payload bytes (see "Accounting").
inline constexpr size_t kBlockOverheadBytes = 512;

struct AgentKey {
  std::string ns;        // namespace (tenant); may be empty = default namespace
  std::string agent_id;  // non-empty
  auto operator<=>(const AgentKey&) const = default;
  bool operator==(const AgentKey&) const = default;
};

// One block with its content id.
struct PoolBlock {
  std::string id;
  std::shared_ptr<const KvBlock> block;
};

struct AgentInfo {
  AgentKey key;
  size_t n_blocks = 0;
  size_t n_tokens = 0;     // sum of the blocks' n_tokens
  size_t bytes = 0;        // charge of its blocks (shared ones counted in full)
  size_t shared_bytes = 0; // of `bytes`: blocks other agents list too (charged once in used_bytes)
  int64_t last_use_ms = 0; // from the clock in BlockPoolOptions
  uint32_t pins = 0;
  bool dirty = false;
  uint64_t version = 0;
};

struct AgentSnapshot {
  std::vector<PoolBlock> blocks;  // in sequence order
  uint64_t version = 0;          // pass to MarkClean after saving these blocks
  bool dirty = false;
};

struct EvictionEvent {
  AgentKey agent;
  size_t freed_bytes = 0;  // bytes released (0 if all blocks were shared)
  bool persisted = false;  // the persist callback ran (and succeeded) first
  Status status;           // non-OK: persisting failed, the agent was kept
};

struct BlockPoolStats {
  size_t budget_bytes = 0;
  size_t used_bytes = 0;
  size_t n_blocks = 0;
  size_t n_agents = 0;
  size_t n_pinned_agents = 0;
  size_t n_dirty_agents = 0;
  uint64_t evictions = 0;         // agents dropped to make room or by EvictToDisk
  uint64_t persist_failures = 0;  // persist callback errors
};

// "Ensure these blocks are on disk as this agent's current state." Called
// without the pool lock; must be safe to call from any thread that uses the
// pool. OK means the agent can be dropped from RAM without losing data.
using PersistFn = std::function<Status(const AgentKey&, const std::vector<PoolBlock>&)>;
using EvictionObserver = std::function<void(const EvictionEvent&)>;

struct BlockPoolOptions {
  size_t budget_bytes = 0;
  PersistFn persist;            // null: dirty agents are never evicted
  EvictionObserver on_evict;    // optional; also called for persist failures
  std::function<int64_t()> now_ms;  // optional; default system_clock ms
};

class BlockPool {
 public:
  explicit BlockPool(BlockPoolOptions options);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Replaces `agent`'s block list with `blocks` (in sequence order) and marks
  // it used now. Ids already stored in the namespace are reused (the passed
  // bytes are then ignored); new ones are stored. dirty=false means the blocks
  // are known to be on disk (restore from the warm tier). Evicts other agents
  // as described above if needed; the target agent itself is never evicted.
  // Returns the agent's new version.
  // Errors: InvalidArgument (empty agent id, empty/duplicate block id, null
  // block), ResourceExhausted (does not fit even after evicting every
  // candidate; nothing changed), or the persist error of the last victim that
  // failed when that left nothing else evictable. On error the agent keeps its
  // previous blocks (other agents may have been evicted, with data on disk).
  Result<uint64_t> Put(const AgentKey& agent, std::vector<PoolBlock> blocks, bool dirty = true);

  // The agent's blocks, version and dirty flag; marks it used. NotFound if absent.
  Result<AgentSnapshot> Get(const AgentKey& agent);

  // True if the agent is in the pool. Does not touch LRU.
  bool Contains(const AgentKey& agent) const;
  Result<AgentInfo> Info(const AgentKey& agent) const;

  // Pin: not evictable or erasable until the matching Unpin. Pins nest.
  // Pin marks the agent used; NotFound if absent.
  // REQUIRES for Unpin: a matching successful Pin (asserted).
  Status Pin(const AgentKey& agent);
  void Unpin(const AgentKey& agent);

  // Clears the dirty flag if the agent's version is still `version` (nothing
  // was Put since the snapshot that was saved). Returns true if the agent is
  // now clean, false if absent or changed (it stays dirty).
  bool MarkClean(const AgentKey& agent, uint64_t version);

  // Drops the agent from RAM WITHOUT persisting (delete / erasure; the caller
  // removes disk files). NotFound if absent, FailedPrecondition if pinned.
  Status Erase(const AgentKey& agent);

  // Persists the agent if dirty, then drops it from RAM (admin evict_only).
  // NotFound if absent; FailedPrecondition if pinned or no persist callback
  // and dirty; the persist error (agent kept); Unavailable if it was Put
  // again while being saved (kept, still dirty; retry).
  Status EvictToDisk(const AgentKey& agent);

  // Evicts LRU candidates until used_bytes() <= target_bytes (for the I/O
  // thread to make room ahead of the inference thread). ResourceExhausted or
  // the last persist error if the target cannot be reached.
  Status EvictDownTo(size_t target_bytes);

  BlockPoolStats Stats() const;
  // Agents of one namespace, most recently used first.
  std::vector<AgentInfo> ListAgents(const std::string& ns) const;

 private:
  using BlockKey = std::pair<std::string, std::string>;  // (namespace, block id)
  struct BlockEntry {
    std::shared_ptr<const KvBlock> block;
    size_t charge_bytes = 0;
    uint32_t refs = 0;
  };
  struct AgentEntry {
    std::vector<std::string> block_ids;
    uint64_t last_use_tick = 0;  // LRU order (logical clock, strictly increasing)
    int64_t last_use_ms = 0;     // for reporting only
    uint32_t pins = 0;
    bool dirty = false;
    uint64_t version = 0;
  };
  using Lock = std::unique_lock<std::mutex>;

  // All below REQUIRE mu_ held.
  void Touch(AgentEntry& entry);
  size_t BytesAfterPut(const AgentKey& agent, const std::vector<PoolBlock>& blocks) const;
  void Release(const std::string& ns, const std::vector<std::string>& ids);
  size_t Drop(std::map<AgentKey, AgentEntry>::iterator it);  // returns freed bytes
  AgentInfo InfoLocked(const AgentKey& key, const AgentEntry& entry) const;
  std::vector<PoolBlock> SnapshotLocked(const AgentKey& key, const AgentEntry& entry) const;
  // Evicts the LRU candidate (not `exclude`, not in `skip`). Returns false if
  // there is none. May unlock `lock` to persist. Appends to `events`; on a
  // persist failure inserts the victim into `skip` and sets `*error`.
  bool EvictOne(Lock& lock, const AgentKey* exclude, std::set<AgentKey>& skip,
                std::vector<EvictionEvent>& events, Status* error);
  // REQUIRES: agent present and dirty, persist_ set. Pins it, unlocks, calls
  // persist_, relocks, unpins. OK: saved and, if its version is unchanged,
  // marked clean; otherwise *changed = true (still dirty). Returns persist_'s
  // error as is (agent untouched, counted in persist_failures_).
  Status PersistUnlocked(Lock& lock, const AgentKey& agent, bool* changed);
  void Notify(const std::vector<EvictionEvent>& events) const;  // REQUIRES mu_ NOT held

  const size_t budget_bytes_;
  const PersistFn persist_;
  const EvictionObserver on_evict_;
  const std::function<int64_t()> now_ms_;

  mutable std::mutex mu_;
  std::map<BlockKey, BlockEntry> blocks_;    // guarded by mu_
  std::map<AgentKey, AgentEntry> agents_;    // guarded by mu_
  size_t used_bytes_ = 0;                    // guarded by mu_
  uint64_t tick_ = 0;                        // guarded by mu_
  uint64_t next_version_ = 1;                // guarded by mu_
  uint64_t evictions_ = 0;                   // guarded by mu_
  uint64_t persist_failures_ = 0;            // guarded by mu_
};

}  // namespace agentkv
