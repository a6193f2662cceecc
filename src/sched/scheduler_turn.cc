// Scheduler, inference thread: admitting requests, restoring an agent's cache
// from the best tier, and committing it after a turn.
#include <algorithm>
#include <cstdio>
#include <random>

#include "prefix/agent_lookup.h"
#include "sched/scheduler.h"
#include "sched/scheduler_types.h"
#include "store/store_ids.h"
#include "util/hash.h"
#include "util/log.h"

namespace agentkv::sched {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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
  return r;
}

CachedSequence FromRecord(const AgentRecord& r) {
  CachedSequence seq;
  seq.text = r.text;
  seq.tokens = r.tokens;
  for (const auto& s : r.spans) seq.spans.push_back({s.begin, s.end});
  return seq;
}

// Number of leading blocks whose ids match the ids the tokens imply: the
// blocks that really belong to this token sequence.
size_t MatchingBlocks(const std::vector<PoolBlock>& blocks, const std::vector<std::string>& expected) {
  size_t n = 0;
  while (n < blocks.size() && n < expected.size() && blocks[n].id == expected[n]) ++n;
  return n;
}

}  // namespace

Scheduler::Agent* Scheduler::FindAgent(const AgentKey& key) {
  auto it = agents_.find(key);
  if (it != agents_.end()) return it->second.get();
  if (store_ != nullptr && !indexed_namespaces_.count(key.ns)) {
    auto rec = store_->GetRecord(key.ns, key.agent_id);
    if (rec.ok()) {
      auto a = std::make_unique<Agent>();
      a->key = key;
      a->seq = FromRecord(*rec);
      a->on_disk = true;
      a->last_use_ms = rec->updated_ms;
      return agents_.emplace(key, std::move(a)).first->second.get();
    }
  }
  return nullptr;
}

Scheduler::Agent& Scheduler::GetOrLoadAgent(const AgentKey& key) {
  if (Agent* a = FindAgent(key)) return *a;
  auto a = std::make_unique<Agent>();
  a->key = key;
  return *agents_.emplace(key, std::move(a)).first->second;
}

void Scheduler::LoadNamespaceIndex(const std::string& ns) {
  if (store_ == nullptr || indexed_namespaces_.count(ns)) return;
  auto list = store_->ListAgents(ns);
  if (list.ok()) {
    for (const auto& s : *list) {
      if (s.usable) (void)FindAgent({ns, s.agent_id});
    }
  }
  indexed_namespaces_.insert(ns);
}

Result<std::string> Scheduler::ResolveImplicitAgent(const std::string& ns, const std::string& prompt) {
  LoadNamespaceIndex(ns);
  std::vector<Agent*> candidates;
  std::vector<std::string_view> texts;
  for (auto& [key, agent] : agents_) {
    if (key.ns != ns || agent->busy || agent->seq.tokens.empty()) continue;
    candidates.push_back(agent.get());
    texts.push_back(agent->seq.text);
  }
  std::string new_id;
  {
    char buf[40];
    std::snprintf(buf, sizeof buf, "auto-%s", Hex64(Xxh3_64(prompt, NowMs() + next_auto_id_++)).c_str());
    new_id = buf;
  }
  auto best = FindLongestPrefixAgent(texts, prompt);
  if (!best) return new_id;
  Agent& found = *candidates[best->index];
  const auto spans = MatchableSpans(found.seq.spans, found.seq.text.size());
  const PrefixMatch m = MatchPrefix(found.seq.text, spans, prompt, {options_.diverge_ratio});
  if (m.type == MatchType::kExact || m.type == MatchType::kExtend) return found.key.agent_id;
  if (m.type == MatchType::kMiss) return new_id;
  // DIVERGE: fork a new agent that starts from the found agent's cache, so the
  // old conversation stays intact.
  Agent& fork = GetOrLoadAgent({ns, new_id});
  fork.seq = found.seq;
  fork.fork_source = found.key;
  return new_id;
}

int Scheduler::AcquireSlot(const Agent& for_agent) {
  if (for_agent.slot >= 0) return for_agent.slot;
  for (size_t s = 0; s < slot_owner_.size(); ++s) {
    if (slot_owner_[s] == nullptr) return static_cast<int>(s);
  }
  // Evict the least recently used idle resident agent; its cache was committed
  // to the pool (and queued for disk) when its turn ended.
  Agent* victim = nullptr;
  for (Agent* a : slot_owner_) {
    if (a != nullptr && !a->busy && (victim == nullptr || a->last_use_ms < victim->last_use_ms)) victim = a;
  }
  if (victim == nullptr) return -1;
  if (!pool_.Contains(victim->key)) io_.Flush();  // not hot: make sure its disk copy is complete
  const int slot = victim->slot;
  ctx_.ClearSlot(slot);
  slot_owner_[static_cast<size_t>(slot)] = nullptr;
  victim->slot = -1;
  metrics_.CountEviction("slot");
  return slot;
}

void Scheduler::Admit() {
  const auto now = Clock::now();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Waiting& w = **it;
    const double waited_ms = std::chrono::duration<double, std::milli>(now - w.received).count();
    if (w.req.cancel.cancelled()) {
      w.sink->OnError(Status::Cancelled("request cancelled while queued"));
      metrics_.CountRequest("cancelled");
      it = waiting_.erase(it);
      --n_waiting_;
      continue;
    }
    if (waited_ms > static_cast<double>(options_.queue_timeout_ms)) {
      w.sink->OnError(Status::FailedPrecondition("timed out waiting for the agent or a free slot"));
      metrics_.CountRequest("error");
      it = waiting_.erase(it);
      --n_waiting_;
      continue;
    }
    if (TryAdmit(w)) {
      it = waiting_.erase(it);
      --n_waiting_;
    } else {
      ++it;
    }
  }
}

bool Scheduler::TryAdmit(Waiting& w) {
  if (w.req.agent_id.empty()) {
    auto id = ResolveImplicitAgent(w.req.namespace_id, w.prompt);
    if (!id.ok()) {
      w.sink->OnError(id.status());
      return true;
    }
    w.req.agent_id = *id;
  }
  const AgentKey key{w.req.namespace_id, w.req.agent_id};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (prefetching_.count(key)) return false;  // its blocks are on their way from disk
  }
  Agent& agent = GetOrLoadAgent(key);
  if (agent.busy) return false;
  const int slot = AcquireSlot(agent);
  if (slot < 0) return false;

  auto a = std::make_unique<Active>();
  a->w = std::make_unique<Waiting>(std::move(w));
  Status s = Prepare(*a->w, agent, slot, a.get());
  if (!s.ok()) {
    a->w->sink->OnError(s);
    metrics_.CountRequest("error");
    if (agent.slot < 0 && ctx_.SlotLength(slot) > 0) ctx_.ClearSlot(slot);
    return true;
  }
  agent.busy = true;
  agent.slot = slot;
  agent.last_use_ms = NowMs();
  slot_owner_[static_cast<size_t>(slot)] = &agent;
  a->w->sink->OnStart();
  active_.push_back(std::move(a));
  n_active_ = active_.size();
  return true;
}

Status Scheduler::Prepare(Waiting& w, Agent& agent, int slot, Active* a) {
  const engine::ModelCacheSpec& spec = ctx_.spec();
  const uint32_t cached_tokens = static_cast<uint32_t>(agent.seq.tokens.size());
  api::CacheState state = api::CacheState::kCold;
  uint32_t available = 0;
  std::vector<PoolBlock> blocks;  // hot/warm source
  const auto t_disk = Clock::now();
  if (agent.slot >= 0) {
    state = api::CacheState::kResident;
    available = static_cast<uint32_t>(ctx_.SlotLength(slot));
  } else if (cached_tokens > 0) {
    const AgentKey source = agent.fork_source.value_or(agent.key);
    if (auto snap = pool_.Get(source); snap.ok()) {
      blocks = std::move(snap->blocks);
      state = api::CacheState::kHot;
      std::lock_guard<std::mutex> lock(mu_);
      if (prefetched_.erase(source) != 0) state = api::CacheState::kWarm;  // read ahead from disk
    } else if (store_ != nullptr && (agent.on_disk || agent.fork_source)) {
      auto loaded = store_->LoadBlocks(source.ns, source.agent_id);
      if (loaded.ok()) {
        if (!loaded->complete) metrics_.CountCorruption(1);
        for (size_t i = 0; i < loaded->blocks.size(); ++i) {
          blocks.push_back({loaded->record.blocks[i].id, std::make_shared<KvBlock>(std::move(loaded->blocks[i]))});
        }
        state = api::CacheState::kWarm;
        metrics_.ObserveDiskWait(std::chrono::duration<double, std::milli>(Clock::now() - t_disk).count());
      }
    }
    if (!blocks.empty()) {
      blocks.resize(MatchingBlocks(blocks, ComputeBlockIds(spec.fingerprint, agent.seq.tokens)));
      std::vector<const KvBlock*> ptrs;
      for (const auto& b : blocks) ptrs.push_back(b.block.get());
      available = engine::RestorablePrefix(ptrs, spec.shape, cached_tokens);
    }
  }

  TurnPlan plan = PlanTurn(w.fresh, agent.seq, w.prompt, available, {options_.diverge_ratio});
  if (plan.n_keep > 0) {
    Status restored;
    if (state == api::CacheState::kResident) {
      restored = ctx_.TruncateSlot(slot, static_cast<int32_t>(plan.n_keep));
    } else {
      std::vector<const KvBlock*> ptrs;
      for (const auto& b : blocks) ptrs.push_back(b.block.get());
      restored = ctx_.ImportSlotBlocks(slot, ptrs, plan.n_keep);
      if (restored.ok() && state == api::CacheState::kWarm && !agent.fork_source) {
        (void)pool_.Put(agent.key, blocks, /*dirty=*/false);  // hot next time, if it fits
      }
    }
    if (!restored.ok()) {
      AKV_LOG_WARN("restore of agent %s failed (%s); prefilling cold", agent.key.agent_id.c_str(),
                   restored.ToString().c_str());
      plan = PlanTurn(w.fresh, agent.seq, w.prompt, 0);
    }
  }
  if (plan.n_keep == 0) {
    state = api::CacheState::kCold;
    ctx_.ClearSlot(slot);
  }
  if (plan.new_tokens.empty()) return Status::InvalidArgument("prompt: nothing to evaluate (empty prompt)");
  const int64_t prompt_tokens = plan.n_keep + static_cast<int64_t>(plan.new_tokens.size());
  if (prompt_tokens >= ctx_.options().slot_ctx) {
    ctx_.ClearSlot(slot);
    return Status::InvalidArgument("prompt: " + std::to_string(prompt_tokens) + " tokens do not fit the context of " +
                                   std::to_string(ctx_.options().slot_ctx));
  }
  agent.fork_source.reset();
  agent.seq.tokens.resize(plan.n_keep);
  agent.seq.spans.resize(plan.n_keep);
  agent.seq.text = w.prompt;

  a->agent = &agent;
  a->slot = slot;
  a->pending = std::move(plan.new_tokens);
  a->pending_spans = std::move(plan.new_spans);
  const auto& sp = w.req.sampling;
  engine::SamplingParams params{sp.temperature, sp.top_k, sp.top_p,
                                sp.seed ? static_cast<uint64_t>(*sp.seed) : std::random_device{}()};
  a->sampler = std::make_unique<engine::Sampler>(params);
  a->max_tokens = sp.max_tokens.value_or(options_.default_max_tokens);
  for (const auto& stop : sp.stop) a->max_stop_len = std::max(a->max_stop_len, stop.size());
  a->usage.agent_id = agent.key.agent_id;
  a->usage.cache_state = state;
  a->usage.match = state == api::CacheState::kCold ? api::MatchType::kMiss
                                                    : static_cast<api::MatchType>(static_cast<int>(plan.match));
  a->usage.prompt_tokens = prompt_tokens;
  a->usage.cached_tokens = plan.n_keep;
  a->usage.tokens_prefilled = static_cast<int64_t>(a->pending.size());
  metrics_.CountMatch(api::MatchTypeName(a->usage.match));
  metrics_.AddTokens(a->pending.size(), plan.n_keep, 0);
  return Status::OK();
}

void Scheduler::CommitTurn(Agent& agent) {
  agent.last_use_ms = NowMs();
  // The text the KV was computed from ends where its last token ends.
  if (!agent.seq.spans.empty() && agent.seq.spans.back().end != engine::kUnalignedSpan &&
      agent.seq.spans.back().end <= agent.seq.text.size()) {
    agent.seq.text.resize(agent.seq.spans.back().end);
  } else if (agent.seq.tokens.empty()) {
    agent.seq.text.clear();
  }
  if (agent.seq.tokens.empty()) return;
  const auto ids = ComputeBlockIds(ctx_.spec().fingerprint, agent.seq.tokens);
  // Blocks the pool already holds under the same ids are the same KV (ids
  // chain the model fingerprint and every token up to the block's end), so
  // only the blocks after them are copied out of the slot: a turn costs
  // O(new tokens) in copies, not O(context).
  // Not on sliding-window models: their blocks' window rows depend on where
  // the sequence ended when they were exported.
  std::vector<PoolBlock> refs;
  if (auto held = pool_.Get(agent.key); held.ok() && !ctx_.spec().HasSlidingWindow()) {
    refs = std::move(held->blocks);
    refs.resize(MatchingBlocks(refs, ids));
  }
  auto exported = ctx_.ExportSlotBlocks(agent.slot, static_cast<uint32_t>(refs.size()));
  if (!exported.ok()) {
    AKV_LOG_ERROR("export of agent %s failed: %s", agent.key.agent_id.c_str(), exported.status().ToString().c_str());
    return;
  }
  for (size_t i = 0; i < exported->size() && refs.size() < ids.size(); ++i) {
    refs.push_back({ids[refs.size()], std::make_shared<KvBlock>(std::move((*exported)[i]))});
  }
  AgentRecord record = ToRecord(agent.key, agent.seq, ctx_.spec());
  {
    std::lock_guard<std::mutex> lock(mu_);
    committed_[agent.key] = record;
  }
  auto version = pool_.Put(agent.key, refs, /*dirty=*/store_ != nullptr);
  if (store_ == nullptr) return;
  agent.on_disk = true;  // once the queued save lands; saves run FIFO before any later load
  const AgentKey key = agent.key;
  const uint64_t v = version.ok() ? *version : 0;
  const bool in_pool = version.ok();
  io_.Post([this, key, record = std::move(record), refs = std::move(refs), v, in_pool] {
    auto provider = [&refs](uint32_t index, const std::string& id) -> Result<KvBlock> {
      if (index >= refs.size() || refs[index].id != id) return Status::Internal("save: block not available");
      return *refs[index].block;
    };
    auto saved = store_->SaveAgent(key.ns, record, provider);
    if (!saved.ok()) {
      AKV_LOG_ERROR("save of agent %s failed: %s", key.agent_id.c_str(), saved.status().ToString().c_str());
      return;
    }
    if (in_pool) pool_.MarkClean(key, v);
  });
}

Status Scheduler::PersistAgent(const AgentKey& key, const std::vector<PoolBlock>& blocks) {
  if (store_ == nullptr) return Status::FailedPrecondition("persist: no disk tier");
  AgentRecord record;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = committed_.find(key);
    if (it == committed_.end()) return Status::NotFound("persist: no committed record for " + key.agent_id);
    record = it->second;
  }
  auto provider = [&blocks](uint32_t index, const std::string& id) -> Result<KvBlock> {
    if (index >= blocks.size() || blocks[index].id != id) return Status::Internal("persist: block not available");
    return *blocks[index].block;
  };
  return store_->SaveAgent(key.ns, record, provider).status();
}

api::AgentInfo Scheduler::InfoOf(const Agent& a) const {
  api::AgentInfo info;
  info.id = a.key.agent_id;
  info.tokens = static_cast<int64_t>(a.seq.tokens.size());
  info.busy = a.busy;
  info.last_used_unix_ms = a.last_use_ms;
  const uint64_t bpt = ctx_.spec().BytesPerToken(ctx_.spec().type_k, ctx_.spec().type_v);
  auto pool_info = pool_.Info(a.key);
  if (a.slot >= 0) {
    info.tier = api::CacheState::kResident;
  } else if (pool_info.ok()) {
    info.tier = api::CacheState::kHot;
  } else if (a.on_disk) {
    info.tier = api::CacheState::kWarm;
  } else {
    info.tier = api::CacheState::kCold;
  }
  // The size of the agent's Q4 cache in RAM: its pool copy, or its slot when
  // it has no pool copy (not both: they hold the same positions).
  if (pool_info.ok()) {
    info.ram_bytes = static_cast<int64_t>(pool_info->bytes);
  } else if (a.slot >= 0) {
    info.ram_bytes = info.tokens * static_cast<int64_t>(bpt);
  }
  if (store_ != nullptr) {
    if (auto s = const_cast<AgentStore*>(store_)->GetSummary(a.key.ns, a.key.agent_id); s.ok()) {
      info.disk_bytes = static_cast<int64_t>(s->block_bytes);
    }
  }
  return info;
}

}  // namespace agentkv::sched
