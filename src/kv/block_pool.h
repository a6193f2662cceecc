#pragma once
// BlockPool: the hot tier. Agents' KV blocks in RAM, within a byte budget,
// with LRU eviction over the agents that are safe to drop.
//
// Model. A block is identified by (namespace, block id); ids are content
// addresses chosen by the caller (issue #3: hash chain of parent id, token ids
// and model fingerprint), so equal ids mean equal bytes. A block is stored once
// per namespace and reference-counted by the agents that list it; blocks are
// never shared across namespaces. An agent (namespace, agent id) owns an
// ordered list of block ids plus: last use, pin count, dirty flag (it has
// blocks the disk may not have) and a generation that changes on every Put.
//
// Accounting. Each stored block is charged payload_bytes() + kBlockOverheadBytes
// (the fixed part approximates the KvBlock/KvTensor headers, the shared_ptr
// control block, the map node and the id string; tensor names are not counted
// separately). A block shared by N agents is charged once. Blocks handed out
// by Get() stay alive while the caller holds them even after eviction; that
// memory is not charged, so callers hold them only briefly.
//
// Durability is the caller's. The pool never writes to disk: the scheduler
// saves an agent's turn on its I/O thread (write-behind) and then calls
// MarkClean with the generation it saved. Until then the agent is dirty, and a
// dirty agent is never evicted, so dropping an agent never loses data.
//
// Eviction. When a Put would exceed the budget, the least recently used agent
// that is clean, not pinned and not the one being Put is dropped, releasing
// its block references (blocks still listed by other agents stay). This
// repeats until the Put fits; ResourceExhausted when no candidate is left
// (everything else is pinned or not yet saved). A Put therefore never waits
// for I/O.
//
// Thread safety. Internally synchronized by one mutex; every method may be
// called from any thread (the inference thread and the I/O thread both do).
// The eviction observer is always called WITHOUT the mutex held, on the thread
// whose call triggered it, so it may call back into the pool.
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
#include <string>
#include <utility>
#include <vector>

#include "store/kv_block.h"
#include "util/mutex.h"
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
  uint64_t generation = 0;
};

struct AgentSnapshot {
  std::vector<PoolBlock> blocks;  // in sequence order
  uint64_t generation = 0;       // pass to MarkClean after saving these blocks
  bool dirty = false;
};

// One agent dropped from RAM (its state was on disk, or nothing needs it).
struct EvictionEvent {
  AgentKey agent;
  size_t freed_bytes = 0;  // bytes released (0 if all blocks were shared)
};

struct BlockPoolStats {
  size_t budget_bytes = 0;
  size_t used_bytes = 0;
  size_t n_blocks = 0;
  size_t n_agents = 0;
  size_t n_pinned_agents = 0;
  size_t n_dirty_agents = 0;
  uint64_t evictions = 0;  // agents dropped to make room or by EvictToDisk
};

using EvictionObserver = std::function<void(const EvictionEvent&)>;

struct BlockPoolOptions {
  size_t budget_bytes = 0;
  EvictionObserver on_evict;        // optional
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
  // are known to be on disk (restore from the warm tier). Evicts other clean
  // agents as described above if needed; the target agent itself is never
  // evicted. Returns the agent's new generation.
  // Errors: InvalidArgument (empty agent id, empty/duplicate block id, null
  // block), ResourceExhausted (does not fit even after evicting every
  // candidate). On error the agent keeps its previous blocks (other, clean
  // agents may have been evicted).
  Result<uint64_t> Put(const AgentKey& agent, std::vector<PoolBlock> blocks, bool dirty = true);

  // The agent's blocks, generation and dirty flag; marks it used. NotFound if absent.
  Result<AgentSnapshot> Get(const AgentKey& agent);

  // True if the agent is in the pool. Does not touch LRU.
  bool Contains(const AgentKey& agent) const;
  Result<AgentInfo> Info(const AgentKey& agent) const;

  // Pin: not evictable or erasable until the matching Unpin. Pins nest.
  // Pin marks the agent used; NotFound if absent.
  // REQUIRES for Unpin: a matching successful Pin (asserted).
  Status Pin(const AgentKey& agent);
  void Unpin(const AgentKey& agent);

  // Clears the dirty flag if the agent's generation is still `generation`
  // (nothing was Put since the snapshot that was saved). Returns true if the
  // agent is now clean, false if absent or changed (it stays dirty).
  bool MarkClean(const AgentKey& agent, uint64_t generation);

  // Drops the agent from RAM, dirty or not (delete / erasure; the caller
  // removes disk files). NotFound if absent, FailedPrecondition if pinned.
  Status Erase(const AgentKey& agent);

  // Drops a clean agent from RAM, leaving it on disk (admin evict_only; the
  // caller first waits for its saves). NotFound if absent; FailedPrecondition
  // (agent kept) if pinned or dirty (not saved yet).
  Status EvictToDisk(const AgentKey& agent);

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
    uint64_t generation = 0;
  };
  using Lock = MutexLock;

  void Touch(AgentEntry& entry) REQUIRES(mu_);
  size_t BytesAfterPut(const AgentKey& agent, const std::vector<PoolBlock>& blocks) const REQUIRES(mu_);
  void Release(const std::string& ns, const std::vector<std::string>& ids) REQUIRES(mu_);
  size_t Drop(std::map<AgentKey, AgentEntry>::iterator it) REQUIRES(mu_);  // returns freed bytes
  AgentInfo InfoLocked(const AgentKey& key, const AgentEntry& entry) const REQUIRES(mu_);
  std::vector<PoolBlock> SnapshotLocked(const AgentKey& key, const AgentEntry& entry) const REQUIRES(mu_);
  // Drops the LRU candidate (clean, unpinned, not `exclude`) and appends its
  // event. Returns false if there is none.
  bool EvictOne(const AgentKey& exclude, std::vector<EvictionEvent>& events) REQUIRES(mu_);
  void Notify(const std::vector<EvictionEvent>& events) const EXCLUDES(mu_);

  const size_t budget_bytes_;
  const EvictionObserver on_evict_;
  const std::function<int64_t()> now_ms_;

  mutable Mutex mu_;
  std::map<BlockKey, BlockEntry> blocks_ GUARDED_BY(mu_);
  std::map<AgentKey, AgentEntry> agents_ GUARDED_BY(mu_);
  size_t used_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t tick_ GUARDED_BY(mu_) = 0;
  uint64_t next_generation_ GUARDED_BY(mu_) = 1;
  uint64_t evictions_ GUARDED_BY(mu_) = 0;
};

}  // namespace agentkv
