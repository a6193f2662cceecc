#include "kv/block_pool.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <set>
#include <string_view>

namespace agentkv {
namespace {

std::string Name(const AgentKey& key) { return key.ns + "/" + key.agent_id; }

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status ValidatePut(const AgentKey& agent, const std::vector<PoolBlock>& blocks) {
  if (agent.agent_id.empty()) return Status::InvalidArgument("block pool put: empty agent id");
  std::set<std::string_view> seen;
  for (const PoolBlock& b : blocks) {
    if (b.id.empty() || !b.block) {
      return Status::InvalidArgument("block pool put: " + Name(agent) + ": empty block id or null block");
    }
    if (!seen.insert(b.id).second) {
      return Status::InvalidArgument("block pool put: " + Name(agent) + ": duplicate block id " + b.id);
    }
  }
  return Status::OK();
}

}  // namespace

BlockPool::BlockPool(BlockPoolOptions options)
    : budget_bytes_(options.budget_bytes),
      on_evict_(std::move(options.on_evict)),
      now_ms_(options.now_ms ? std::move(options.now_ms) : SystemNowMs) {}

Result<uint64_t> BlockPool::Put(const AgentKey& agent, std::vector<PoolBlock> blocks, bool dirty) {
  AGENTKV_RETURN_IF_ERROR(ValidatePut(agent, blocks));
  std::vector<EvictionEvent> events;
  Status status;
  uint64_t generation = 0;
  {
    Lock lock(&mu_);
    // Cheap lower bound first, so an impossible Put evicts nobody.
    size_t own_bytes = 0;
    for (const PoolBlock& b : blocks) {
      auto it = blocks_.find({agent.ns, b.id});
      own_bytes += it != blocks_.end() ? it->second.charge_bytes : b.block->payload_bytes() + kBlockOverheadBytes;
    }
    if (own_bytes > budget_bytes_) {
      return Status::ResourceExhausted("block pool put: " + Name(agent) + ": " + std::to_string(own_bytes) +
                                       " bytes exceed the budget of " + std::to_string(budget_bytes_));
    }
    while (BytesAfterPut(agent, blocks) > budget_bytes_) {
      if (!EvictOne(agent, events)) {
        status = Status::ResourceExhausted("block pool put: " + Name(agent) +
                                           ": budget full and nothing evictable (pinned or not saved yet)");
        break;
      }
    }
    if (status.ok()) {
      auto [it, inserted] = agents_.try_emplace(agent);
      AgentEntry& entry = it->second;
      std::vector<std::string> ids;
      ids.reserve(blocks.size());
      // Reference the new list before releasing the old one: shared ids never hit 0.
      for (PoolBlock& b : blocks) {
        auto [bit, is_new] = blocks_.try_emplace({agent.ns, b.id});
        if (is_new) {
          bit->second.charge_bytes = b.block->payload_bytes() + kBlockOverheadBytes;
          bit->second.block = std::move(b.block);
          used_bytes_ += bit->second.charge_bytes;
        }
        ++bit->second.refs;
        ids.push_back(std::move(b.id));
      }
      Release(agent.ns, entry.block_ids);
      entry.block_ids = std::move(ids);
      entry.dirty = dirty;
      entry.generation = next_generation_++;
      generation = entry.generation;
      Touch(entry);
      assert(used_bytes_ <= budget_bytes_);
    }
  }
  Notify(events);
  if (!status.ok()) return status;
  return generation;
}

Result<AgentSnapshot> BlockPool::Get(const AgentKey& agent) {
  Lock lock(&mu_);
  auto it = agents_.find(agent);
  if (it == agents_.end()) return Status::NotFound("block pool get: " + Name(agent));
  Touch(it->second);
  return AgentSnapshot{SnapshotLocked(agent, it->second), it->second.generation, it->second.dirty};
}

bool BlockPool::Contains(const AgentKey& agent) const {
  Lock lock(&mu_);
  return agents_.count(agent) != 0;
}

Result<AgentInfo> BlockPool::Info(const AgentKey& agent) const {
  Lock lock(&mu_);
  auto it = agents_.find(agent);
  if (it == agents_.end()) return Status::NotFound("block pool info: " + Name(agent));
  return InfoLocked(agent, it->second);
}

Status BlockPool::Pin(const AgentKey& agent) {
  Lock lock(&mu_);
  auto it = agents_.find(agent);
  if (it == agents_.end()) return Status::NotFound("block pool pin: " + Name(agent));
  ++it->second.pins;
  Touch(it->second);
  return Status::OK();
}

void BlockPool::Unpin(const AgentKey& agent) {
  Lock lock(&mu_);
  auto it = agents_.find(agent);
  assert(it != agents_.end() && it->second.pins > 0 && "Unpin without Pin");
  if (it != agents_.end() && it->second.pins > 0) --it->second.pins;
}

bool BlockPool::MarkClean(const AgentKey& agent, uint64_t generation) {
  Lock lock(&mu_);
  auto it = agents_.find(agent);
  if (it == agents_.end() || it->second.generation != generation) return false;
  it->second.dirty = false;
  return true;
}

Status BlockPool::Erase(const AgentKey& agent) {
  Lock lock(&mu_);
  auto it = agents_.find(agent);
  if (it == agents_.end()) return Status::NotFound("block pool erase: " + Name(agent));
  if (it->second.pins > 0) return Status::FailedPrecondition("block pool erase: " + Name(agent) + ": pinned");
  Drop(it);
  return Status::OK();
}

Status BlockPool::EvictToDisk(const AgentKey& agent) {
  const std::string op = "block pool evict " + Name(agent);
  std::vector<EvictionEvent> events;
  {
    Lock lock(&mu_);
    auto it = agents_.find(agent);
    if (it == agents_.end()) return Status::NotFound(op);
    if (it->second.pins > 0) return Status::FailedPrecondition(op + ": pinned");
    if (it->second.dirty) return Status::FailedPrecondition(op + ": dirty (not saved yet)");
    events.push_back({agent, Drop(it)});
    ++evictions_;
  }
  Notify(events);
  return Status::OK();
}

BlockPoolStats BlockPool::Stats() const {
  Lock lock(&mu_);
  BlockPoolStats s;
  s.budget_bytes = budget_bytes_;
  s.used_bytes = used_bytes_;
  s.n_blocks = blocks_.size();
  s.n_agents = agents_.size();
  for (const auto& [key, entry] : agents_) {
    s.n_pinned_agents += entry.pins > 0;
    s.n_dirty_agents += entry.dirty;
  }
  s.evictions = evictions_;
  return s;
}

std::vector<AgentInfo> BlockPool::ListAgents(const std::string& ns) const {
  Lock lock(&mu_);
  std::vector<std::pair<uint64_t, AgentInfo>> found;
  for (auto it = agents_.lower_bound(AgentKey{ns, ""}); it != agents_.end() && it->first.ns == ns; ++it) {
    found.emplace_back(it->second.last_use_tick, InfoLocked(it->first, it->second));
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<AgentInfo> out;
  out.reserve(found.size());
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

// ---- private, REQUIRE mu_ held ----

void BlockPool::Touch(AgentEntry& entry) {
  entry.last_use_tick = ++tick_;
  entry.last_use_ms = now_ms_();
}

size_t BlockPool::BytesAfterPut(const AgentKey& agent, const std::vector<PoolBlock>& blocks) const {
  size_t bytes = used_bytes_;
  std::set<std::string_view> new_ids;
  for (const PoolBlock& b : blocks) {
    new_ids.insert(b.id);
    if (blocks_.count({agent.ns, b.id}) == 0) bytes += b.block->payload_bytes() + kBlockOverheadBytes;
  }
  auto it = agents_.find(agent);
  if (it == agents_.end()) return bytes;
  for (const std::string& id : it->second.block_ids) {
    const BlockEntry& e = blocks_.at({agent.ns, id});
    if (e.refs == 1 && new_ids.count(id) == 0) bytes -= e.charge_bytes;  // only we hold it
  }
  return bytes;
}

void BlockPool::Release(const std::string& ns, const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    auto it = blocks_.find({ns, id});
    assert(it != blocks_.end() && it->second.refs > 0);
    if (--it->second.refs == 0) {
      used_bytes_ -= it->second.charge_bytes;
      blocks_.erase(it);
    }
  }
}

size_t BlockPool::Drop(std::map<AgentKey, AgentEntry>::iterator it) {
  const size_t before = used_bytes_;
  Release(it->first.ns, it->second.block_ids);
  agents_.erase(it);
  return before - used_bytes_;
}

AgentInfo BlockPool::InfoLocked(const AgentKey& key, const AgentEntry& entry) const {
  AgentInfo info;
  info.key = key;
  info.n_blocks = entry.block_ids.size();
  for (const std::string& id : entry.block_ids) {
    const BlockEntry& e = blocks_.at({key.ns, id});
    info.n_tokens += e.block->n_tokens;
    info.bytes += e.charge_bytes;
    if (e.refs > 1) info.shared_bytes += e.charge_bytes;
  }
  info.last_use_ms = entry.last_use_ms;
  info.pins = entry.pins;
  info.dirty = entry.dirty;
  info.generation = entry.generation;
  return info;
}

std::vector<PoolBlock> BlockPool::SnapshotLocked(const AgentKey& key, const AgentEntry& entry) const {
  std::vector<PoolBlock> out;
  out.reserve(entry.block_ids.size());
  for (const std::string& id : entry.block_ids) out.push_back({id, blocks_.at({key.ns, id}).block});
  return out;
}

bool BlockPool::EvictOne(const AgentKey& exclude, std::vector<EvictionEvent>& events) {
  // Linear scan for the LRU candidate: O(agents) per eviction, fine for the
  // hundreds to low thousands of agents one machine serves.
  auto victim = agents_.end();
  for (auto it = agents_.begin(); it != agents_.end(); ++it) {
    const AgentEntry& e = it->second;
    if (e.pins > 0 || e.dirty || it->first == exclude) continue;
    if (victim == agents_.end() || e.last_use_tick < victim->second.last_use_tick) victim = it;
  }
  if (victim == agents_.end()) return false;
  const AgentKey key = victim->first;
  events.push_back({key, Drop(victim)});
  ++evictions_;
  return true;
}

void BlockPool::Notify(const std::vector<EvictionEvent>& events) const {
  if (!on_evict_) return;
  for (const EvictionEvent& e : events) on_evict_(e);
}

}  // namespace agentkv
