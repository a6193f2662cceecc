// AgentTable: the agents known here and their bounds. Every agent costs its
// text, tokens and spans (and a copy of its text in the implicit-lookup
// index); clients choose agent ids, so without a bound the table would grow
// with every id, implicit miss and fork. Agents whose cache lives only on
// disk are dropped, least recently used first, once the table exceeds its
// bound: the disk keeps their manifest (text included), and their next turn
// reads it back.
#include "sched/agent_table.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "prefix/prefix_match.h"
#include "util/hash.h"
#include "util/log.h"

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

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

CachedSequence SequenceOf(const AgentRecord& r) {
  CachedSequence seq;
  seq.text = r.text;
  seq.tokens = r.tokens;
  for (const auto& s : r.spans) seq.spans.push_back({s.begin, s.end});
  seq.prompt = r.prompt;
  return seq;
}

Agent* AgentTable::Find(const AgentKey& key) {
  auto it = agents_.find(key);
  return it == agents_.end() ? nullptr : it->second.get();
}

Agent& AgentTable::GetOrAdd(const AgentKey& key) {
  if (Agent* a = Find(key)) return *a;
  auto a = std::make_unique<Agent>();
  a->key = key;
  Agent& added = *agents_.emplace(key, std::move(a)).first->second;
  Reindex(added);
  return added;
}

Agent& AgentTable::AddFromRecord(const AgentRecord& rec) {
  const AgentKey key{rec.ns, rec.agent_id};
  if (Agent* known = Find(key)) return *known;
  auto a = std::make_unique<Agent>();
  a->key = key;
  a->seq = SequenceOf(rec);
  a->on_disk = true;
  a->last_use_ms = rec.updated_ms;
  a->version = rec.version;
  a->head_bytes = rec.head_bytes;
  Agent& added = *agents_.emplace(key, std::move(a)).first->second;
  Reindex(added);
  return added;
}

void AgentTable::Reindex(Agent& agent) {
  // A fork that has not run yet holds its source's sequence, not a cache of
  // its own: offering it (as an implicit match or a prefix donor) would send
  // others to a cache that is not there.
  const bool candidate = !agent.busy && !agent.isolated && !agent.fork_source && !agent.seq.tokens.empty() &&
                         !agent.seq.text.empty();
  auto index = implicit_index_.find(agent.key.ns);
  uint64_t index_bytes_before = 0;
  if (candidate || agent.indexed) {
    if (index == implicit_index_.end()) index = implicit_index_.emplace(agent.key.ns, PrefixIndex()).first;
    index_bytes_before = index->second.bytes();
    index->second.Set(agent.key.agent_id, candidate ? std::string_view(agent.seq.text) : std::string_view());
    bytes_ += index->second.bytes();
    bytes_ -= index_bytes_before;
    if (index->second.size() == 0) implicit_index_.erase(index);
  }
  agent.indexed = candidate;
  const CachedSequence& s = agent.seq;
  const uint64_t bytes = kAgentOverhead + agent.key.ns.size() + agent.key.agent_id.size() + s.text.capacity() +
                         s.tokens.capacity() * sizeof(int32_t) + s.spans.capacity() * sizeof(engine::TokenSpan);
  bytes_ += bytes;
  bytes_ -= agent.accounted_bytes;
  agent.accounted_bytes = bytes;
  UpdateGauges();
}

void AgentTable::Erase(const AgentKey& key) {
  auto it = agents_.find(key);
  if (it == agents_.end()) return;
  Agent& agent = *it->second;
  agent.busy = true;  // not a candidate: Reindex removes its index entry
  Reindex(agent);
  bytes_ -= agent.accounted_bytes;
  agents_.erase(it);
  UpdateGauges();
}

void AgentTable::UpdateGauges() {
  agents_gauge_ = agents_.size();
  bytes_gauge_ = bytes_;
}

std::optional<PrefixIndex::Hit> AgentTable::LongestPrefix(const std::string& ns, std::string_view prompt) const {
  auto index = implicit_index_.find(ns);
  if (index == implicit_index_.end()) return std::nullopt;
  return index->second.FindLongestPrefix(prompt);
}

void AgentTable::ForEachIn(const std::string& ns, const std::function<void(const Agent&)>& f) const {
  for (auto it = agents_.lower_bound(AgentKey{ns, ""}); it != agents_.end() && it->first.ns == ns; ++it) f(*it->second);
}

size_t AgentTable::Trim(const std::function<bool(const Agent&)>& droppable) {
  if (bytes_ <= budget_bytes_) return 0;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_trim_try_) return 0;
  std::vector<Agent*> victims;
  for (auto& [key, agent] : agents_) {
    if (droppable(*agent)) victims.push_back(agent.get());
  }
  std::sort(victims.begin(), victims.end(), [](const Agent* a, const Agent* b) {
    return a->last_use_ms != b->last_use_ms ? a->last_use_ms < b->last_use_ms : a->key < b->key;
  });
  const auto target = static_cast<uint64_t>(kTrimTarget * static_cast<double>(budget_bytes_));
  size_t dropped = 0;
  for (Agent* v : victims) {
    if (bytes_ <= target) break;
    if (v->on_disk) ns_trimmed_.insert(v->key.ns);
    Erase(AgentKey(v->key));  // a copy: the key dies with the agent
    ++dropped;
  }
  if (bytes_ > budget_bytes_) next_trim_try_ = now + kTrimRetry;
  return dropped;
}

std::string AgentTable::ResolveImplicit(const std::string& ns, const std::string& prompt, bool isolated,
                                        double diverge_ratio) {
  std::string new_id;
  {
    char buf[40];
    std::snprintf(buf, sizeof buf, "auto-%s", Hex64(Xxh3_64(prompt, NowMs() + next_auto_id_++)).c_str());
    new_id = buf;
  }
  if (isolated) return new_id;  // never another conversation of the namespace
  // The index holds exactly the idle agents with a text (AgentTable::Reindex).
  auto best = LongestPrefix(ns, prompt);
  if (!best) return new_id;
  Agent* candidate = Find({ns, best->id});
  if (candidate == nullptr || candidate->busy) {  // cannot happen while Reindex follows every change
    AKV_LOG_ERROR("implicit index out of date for agent %s", best->id.c_str());
    return new_id;
  }
  Agent& found = *candidate;
  const auto spans = MatchableSpans(found.seq.spans, found.seq.text.size());
  const PrefixMatch m = MatchPrefix(found.seq.text, spans, prompt, {diverge_ratio});
  if (m.type == MatchType::kExact || m.type == MatchType::kExtend) return found.key.agent_id;
  if (m.type == MatchType::kMiss) return new_id;
  // DIVERGE: fork a new agent that starts from the found agent's cache, so the
  // old conversation stays intact.
  Agent& fork = GetOrAdd({ns, new_id});
  fork.seq = found.seq;
  fork.fork_source = found.key;
  Reindex(fork);
  return new_id;
}

}  // namespace agentkv::sched
