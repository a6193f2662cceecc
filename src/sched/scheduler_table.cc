// Scheduler, inference thread: the agent table's bounds. Every agent known
// here costs its text, tokens and spans (and a copy of its text in the
// implicit-lookup index); clients choose agent ids, so without a bound the
// table would grow with every id, implicit miss and fork. Agents whose cache
// lives only on disk are dropped, least recently used first, once the table
// exceeds options_.agent_table_bytes: the disk keeps their manifest (text
// included), and their next turn reads it back (TryAdmit).
#include <algorithm>
#include <vector>

#include "sched/scheduler.h"
#include "sched/scheduler_types.h"

namespace agentkv::sched {
namespace {

// Trimming stops at this fraction of the bound, so that it runs once per
// ~10% of growth, not once per new agent.
constexpr double kTrimTarget = 0.9;
// After a trim that could not reach the bound (too many agents in slots or
// RAM), the next try waits this long: no O(table) work per iteration.
constexpr auto kTrimRetry = std::chrono::seconds(1);
constexpr uint64_t kAgentOverhead = 256;  // the Agent, its map node, key strings' headers

}  // namespace

void Scheduler::Reindex(Agent& agent) {
  const bool candidate = !agent.busy && !agent.isolated && !agent.seq.tokens.empty() && !agent.seq.text.empty();
  auto index = implicit_index_.find(agent.key.ns);
  uint64_t index_bytes_before = 0;
  if (candidate || agent.indexed) {
    if (index == implicit_index_.end()) index = implicit_index_.emplace(agent.key.ns, PrefixIndex()).first;
    index_bytes_before = index->second.bytes();
    index->second.Set(agent.key.agent_id, candidate ? std::string_view(agent.seq.text) : std::string_view());
    table_bytes_ += index->second.bytes();
    table_bytes_ -= index_bytes_before;
    if (index->second.size() == 0) implicit_index_.erase(index);
  }
  agent.indexed = candidate;
  const CachedSequence& s = agent.seq;
  const uint64_t bytes = kAgentOverhead + agent.key.ns.size() + agent.key.agent_id.size() + s.text.capacity() +
                         s.tokens.capacity() * sizeof(int32_t) + s.spans.capacity() * sizeof(engine::TokenSpan);
  table_bytes_ += bytes;
  table_bytes_ -= agent.accounted_bytes;
  agent.accounted_bytes = bytes;
  table_agents_gauge_ = agents_.size();
  table_bytes_gauge_ = table_bytes_;
}

void Scheduler::EraseAgent(const AgentKey& key) {
  auto it = agents_.find(key);
  if (it == agents_.end()) return;
  Agent& agent = *it->second;
  agent.busy = true;  // not a candidate: Reindex removes its index entry
  Reindex(agent);
  table_bytes_ -= agent.accounted_bytes;
  agents_.erase(it);
  table_agents_gauge_ = agents_.size();
  table_bytes_gauge_ = table_bytes_;
}

void Scheduler::TrimAgentTable() {
  if (table_bytes_ <= options_.agent_table_bytes) return;
  const auto now = Clock::now();
  if (now < next_trim_try_) return;
  std::set<AgentKey> waiting;  // their requests' admission may still need the entry (a fork's seq)
  for (const auto& w : waiting_) waiting.insert({w->req.namespace_id, w->req.agent_id});
  std::vector<Agent*> victims;
  for (auto& [key, agent] : agents_) {
    const Agent& a = *agent;
    // Only what the disk holds whole: a slot, a pool copy or an unsaved turn
    // is newer than (or absent from) the disk; a pending fork has no manifest.
    // Without a store an agent outside the pool has no cache to lose.
    const bool disk_or_nothing = store_ == nullptr || a.on_disk || a.seq.tokens.empty();
    if (a.busy || a.slot >= 0 || a.fork_source || !disk_or_nothing || waiting.count(key) || pool_.Contains(key)) {
      continue;
    }
    victims.push_back(agent.get());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(victims, [&](const Agent* a) { return unsaved_.count(a->key) != 0; });
  }
  std::sort(victims.begin(), victims.end(), [](const Agent* a, const Agent* b) {
    return a->last_use_ms != b->last_use_ms ? a->last_use_ms < b->last_use_ms : a->key < b->key;
  });
  const auto target = static_cast<uint64_t>(kTrimTarget * static_cast<double>(options_.agent_table_bytes));
  size_t dropped = 0;
  for (Agent* v : victims) {
    if (table_bytes_ <= target) break;
    if (store_ != nullptr && v->on_disk) ns_trimmed_.insert(v->key.ns);
    EraseAgent(AgentKey(v->key));  // a copy: the key dies with the agent
    ++dropped;
  }
  if (dropped > 0) metrics_.CountEviction("table", dropped);
  if (table_bytes_ > options_.agent_table_bytes) next_trim_try_ = now + kTrimRetry;
}

}  // namespace agentkv::sched
