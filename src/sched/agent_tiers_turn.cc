// AgentTiers, the inference thread's side of a turn: which agent a turn
// runs as (the table's, else its manifest's), and the commit of its slot
// once it ended.
#include "engine/context.h"
#include "sched/agent_tiers.h"
#include "sched/turn_plan.h"
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv::sched {
namespace {

AgentRecord ToRecord(const AgentKey& key, const CachedSequence& seq, const engine::ModelCacheSpec& spec) {
  AgentRecord r;
  r.ns = key.ns;
  r.agent_id = key.agent_id;
  r.text = seq.text;
  r.tokens = seq.tokens;
  r.spans.reserve(seq.spans.size());
  for (const auto& s : seq.spans) r.spans.push_back({s.begin, s.end});
  r.kv_types = spec.KvTypesString();
  r.layout_version = engine::kEngineLayoutVersion;
  r.prompt = seq.prompt;
  return r;
}

}  // namespace

// The spot where a new explicit agent (one the store's index does not hold)
// is found new: at once when MayBeOnDisk is false; else by its read
// (LoadFromDisk), which BeginReadForSubmit answered from the store's index.
Agent* AgentTiers::FindForTurn(const AgentKey& key, bool named, bool early, bool* pending) {
  *pending = false;
  if (Agent* known = table_.Find(key)) return known;
  if (store_ == nullptr) return nullptr;
  // Unknown here: it may be on disk (a restart), unless the table knows
  // every agent on disk there. Its read says (a pipelined restore starts
  // from the manifest, read before the blocks).
  if (Erasing(key)) {
    *pending = true;
    return nullptr;
  }
  return MayBeOnDisk(key, named) ? LoadFromDisk(key, early, pending) : nullptr;
}

Agent* AgentTiers::FindParent(const AgentKey& key, bool* pending) {
  *pending = false;
  if (Agent* parent = table_.Find(key)) return parent;
  if (!MergeNamespaceIndex(key.ns)) {  // the disk's agents are on their way
    *pending = true;
    return nullptr;
  }
  if (Agent* parent = table_.Find(key)) return parent;
  // The table may have dropped it: its manifest says (the read's blocks
  // then serve the fork's restore).
  if (store_ == nullptr || !table_.Trimmed(key.ns)) return nullptr;
  return LoadFromDisk(key, /*early=*/false, pending);
}

void AgentTiers::CommitTurn(Agent& agent, const engine::Context& ctx, const std::vector<PoolBlock>& restored,
                            const std::optional<AgentKey>& shared_from) {
  agent.last_use_ms = NowMs();
  // The text the KV was computed from ends where its last token ends.
  if (!agent.seq.spans.empty() && agent.seq.spans.back().end != engine::kUnalignedSpan &&
      agent.seq.spans.back().end <= agent.seq.text.size()) {
    agent.seq.text.resize(agent.seq.spans.back().end);
  } else if (agent.seq.tokens.empty()) {
    agent.seq.text.clear();
  }
  if (agent.seq.prompt.text_bytes > agent.seq.text.size() || agent.seq.prompt.n_tokens > agent.seq.tokens.size()) {
    agent.seq.prompt = {};
  }
  if (agent.seq.tokens.empty()) return;
  const auto ids = ComputeBlockIds(ctx.spec().fingerprint, agent.seq.tokens);
  // Blocks the pool already holds under the same ids are the same KV (ids
  // chain the model fingerprint and every token up to the block's end), so
  // only the blocks after them are copied out of the slot: a turn costs
  // O(new tokens) in copies, not O(context).
  // Not on sliding-window models: their blocks' window rows depend on where
  // the sequence ended when they were exported.
  std::vector<PoolBlock> refs;
  if (!ctx.spec().HasSlidingWindow()) {
    if (auto held = pool_.Get(agent.key); held.ok()) refs = std::move(held->blocks);
    if (refs.empty()) refs = restored;  // not in the pool (full): what the turn was restored from
    if (refs.empty() && shared_from) {  // from a leader's slot: the leader's committed blocks, if any
      if (auto held = pool_.Get(*shared_from); held.ok()) refs = std::move(held->blocks);
    }
    refs.resize(MatchingBlocks(refs, ids));
  }
  auto exported = ctx.ExportSlotBlocks(agent.slot, static_cast<uint32_t>(refs.size()));
  if (!exported.ok()) {
    AKV_LOG_ERROR("export of agent %s failed: %s", agent.key.agent_id.c_str(), exported.status().ToString().c_str());
    return;
  }
  for (size_t i = 0; i < exported->size() && refs.size() < ids.size(); ++i) {
    refs.push_back({ids[refs.size()], std::make_shared<KvBlock>(std::move((*exported)[i]))});
  }
  AgentRecord record = ToRecord(agent.key, agent.seq, ctx.spec());
  // (A record's text fits uint32 offsets, as its spans do.)
  record.head_bytes = agent.head_bytes <= record.text.size() ? static_cast<uint32_t>(agent.head_bytes) : 0;
  agent.version = std::max(agent.version + 1, static_cast<uint64_t>(std::max<int64_t>(agent.last_use_ms, 0)));
  record.version = agent.version;
  // With a store: on disk once the save lands; until then reads find the turn in RAM.
  if (Commit(agent.key, std::move(record), std::move(refs))) agent.on_disk = true;
}


const Agent* AgentTiers::FindIdleDonor(const Agent& agent, std::string_view prompt, IdleDonor* donor) {
  const std::string& ns = agent.key.ns;
  (void)MergeNamespaceIndex(ns);
  // The index holds exactly the namespace's idle, non-isolated agents with a cache and text of their own
  // (AgentTable::Reindex).
  const auto hit = table_.LongestPrefix(ns, prompt);
  if (!hit || hit->id == agent.key.agent_id) return nullptr;
  const Agent* idle = table_.Find({ns, hit->id});
  if (idle == nullptr || idle->busy) return nullptr;
  *donor = IdleDonor{hit->common_bytes, idle->seq.text.size(), idle->slot >= 0 || pool_.Contains(idle->key)};
  return idle;
}

}  // namespace agentkv::sched
