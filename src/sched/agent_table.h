#pragma once
// AgentTable: every agent known to this process (its cached sequence, tier
// flags, version) and the implicit-lookup index of idle agents' texts, within
// a byte bound. Owned by AgentTiers (sched/agent_tiers.h), which merges
// namespace indexes into it and trims it; used by the inference loop.
//
// Thread safety: none; the inference thread only (admin calls reach it as
// tasks on that thread). Agent pointers stay valid until Erase or Trim drops
// the agent.
// Invariants: the index of a namespace holds exactly its agents that are
// not busy, not isolated, not a fork that has not run (fork_source) and have
// tokens and text (after each Reindex);
// bytes() approximates the agents' and the index's memory.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "kv/block_pool.h"
#include "prefix/prefix_index.h"
#include "sched/turn_plan.h"
#include "store/agent_record.h"

namespace agentkv::sched {

// One agent known to this process. `seq` is the agent's cached sequence:
// while idle, exactly what its newest cache (slot, pool or disk) holds; during
// a turn, the tokens in its slot (text may run ahead by the unprocessed prompt).
struct Agent {
  AgentKey key;
  CachedSequence seq;
  int slot = -1;               // resident slot, -1 if none
  bool busy = false;           // a request is active for it
  bool on_disk = false;        // the store holds a manifest for it
  std::optional<AgentKey> fork_source;  // implicit fork: restore from this agent's blocks
  int64_t last_use_ms = 0;
  // Of its newest committed turn (AgentRecord::version; the store refuses to
  // go back to a lower one): max(previous + 1, commit time in Unix ms), so a
  // later commit has a higher version, across restarts too.
  uint64_t version = 0;
  // Created by a request of an isolated API key: never a candidate of another
  // request's implicit lookup, never a prefix donor. (Not kept in the
  // manifest: after a restart only the namespace, which is the key's own,
  // keeps other keys away from it.)
  bool isolated = false;
  // A side agent (sched/side_request.h): the main agent whose side requests
  // it serves. It gives up its slot before main agents do, and never takes
  // that main agent's slot while another can be had.
  std::optional<AgentKey> side_of;
  // Bytes of its last prompt that were the system text and tools
  // (HeadBytes), kept in its manifest (AgentRecord::head_bytes); 0: unknown
  // (a completion, or a manifest written before they were kept).
  size_t head_bytes = 0;
  // Bookkeeping of AgentTable::Reindex.
  bool indexed = false;         // in the implicit index
  uint64_t accounted_bytes = 0;  // its share of the table's bytes
};

// Unix time in ms (agents' last use, versions).
int64_t NowMs();

// The cached sequence a manifest describes.
CachedSequence SequenceOf(const AgentRecord& r);

class AgentTable {
 public:
  explicit AgentTable(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}

  Agent* Find(const AgentKey& key);
  // The agent of `key`, added (with nothing cached) if unknown.
  Agent& GetOrAdd(const AgentKey& key);
  // Adds the agent a manifest describes, unless `rec`'s agent is known
  // (then returns the known one untouched).
  Agent& AddFromRecord(const AgentRecord& rec);
  // After any change of an agent's text, busy flag or tier: updates its
  // index entry and its share of bytes().
  void Reindex(Agent& agent);
  // Drops the agent (and its index entry); no-op if unknown.
  void Erase(const AgentKey& key);
  // The idle, non-isolated agent of `ns` whose text shares the longest
  // prefix with `prompt` (the index's hit); empty if none.
  std::optional<PrefixIndex::Hit> LongestPrefix(const std::string& ns, std::string_view prompt) const;
  // The agent an id-less request continues (an idle agent whose text the
  // prompt EXACT-matches or EXTENDs), a fork of one (DIVERGE: a new agent
  // starting from its cache) or a new id ("auto-<hash>"); `isolated`:
  // always a new id.
  std::string ResolveImplicit(const std::string& ns, const std::string& prompt, bool isolated, double diverge_ratio);
  // Calls `f` for every agent of `ns`, in key order.
  void ForEachIn(const std::string& ns, const std::function<void(const Agent&)>& f) const;
  // Whether Trim dropped an agent of `ns` that lives on disk (the table then
  // no longer knows every agent there).
  bool Trimmed(const std::string& ns) const { return ns_trimmed_.count(ns) != 0; }

  // While bytes() is above the bound: drops the least recently used agents
  // `droppable` allows, down to 90% of it (not retried within a second of a
  // trim that could not reach the bound). `on_disk` agents dropped mark
  // their namespace Trimmed. Returns how many were dropped.
  size_t Trim(const std::function<bool(const Agent&)>& droppable);

  uint64_t bytes() const { return bytes_; }
  uint64_t budget_bytes() const { return budget_bytes_; }
  // For /metrics (any thread).
  uint64_t agents_gauge() const { return agents_gauge_.load(); }
  uint64_t bytes_gauge() const { return bytes_gauge_.load(); }

 private:
  void UpdateGauges();

  const uint64_t budget_bytes_;
  std::map<AgentKey, std::unique_ptr<Agent>> agents_;
  std::map<std::string, PrefixIndex> implicit_index_;  // per namespace: idle agents' texts
  uint64_t bytes_ = 0;                                 // agents_ + implicit_index_, approximately
  std::set<std::string> ns_trimmed_;                   // namespaces some of whose disk agents were dropped
  std::chrono::steady_clock::time_point next_trim_try_{};  // after a trim that could not reach the bound
  std::atomic<uint64_t> agents_gauge_{0}, bytes_gauge_{0};
  uint64_t next_auto_id_ = 0;  // seeds new ids' hashes
};

}  // namespace agentkv::sched
