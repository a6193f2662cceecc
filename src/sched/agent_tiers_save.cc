// AgentTiers, writes: committed turns and their write-behind saves, the
// unsaved turns reads are served from, erasure, and the disk's view for
// admin calls and metrics.
#include "sched/agent_tiers.h"

#include "util/log.h"
#include "util/warm_memory.h"

namespace agentkv::sched {

BlockProvider ProviderOfBlocks(const std::vector<PoolBlock>& blocks, const char* what) {
  return [&blocks, what](uint32_t index, const std::string& id) -> Result<KvBlock> {
    if (index >= blocks.size() || blocks[index].id != id) {
      return Status::Internal(std::string(what) + ": block not available");
    }
    return *blocks[index].block;
  };
}

bool AgentTiers::Commit(const AgentKey& key, AgentRecord record, std::vector<PoolBlock> blocks) {
  auto pool_generation = pool_.Put(key, blocks, /*dirty=*/store_ != nullptr);
  if (store_ == nullptr) return false;
  PostSave(key, std::move(record), std::move(blocks), pool_generation.ok(), pool_generation.ok() ? *pool_generation : 0);
  return true;
}

void AgentTiers::PostSave(const AgentKey& key, AgentRecord record, std::vector<PoolBlock> blocks, bool in_pool,
                          uint64_t pool_generation) {
  auto turn = std::make_shared<const UnsavedTurn::Data>(UnsavedTurn::Data{std::move(record), std::move(blocks)});
  uint64_t seq = 0;
  {
    MutexLock lock(&mu_);
    seq = ++next_save_seq_;
    SavePosted(key);
    unsaved_[key] = UnsavedTurn{turn, seq};
    reads_by_key_.erase(key);  // a read of an older version is stale now
  }
  saves_.Post([this, key, seq, turn, in_pool, pool_generation] {
    const std::vector<PoolBlock>& blocks = turn->blocks;
    auto saved = store_->SaveAgent(key.ns, turn->record, ProviderOfBlocks(blocks, "save"));
    if (!saved.ok()) {
      // The turn stays in unsaved_ (RAM): nothing is lost while the process lives.
      AKV_LOG_ERROR("save of agent %s failed: %s", key.agent_id.c_str(), saved.status().ToString().c_str());
      metrics_.CountSaveFailure();
    } else {
      if (in_pool) pool_.MarkClean(key, pool_generation);
      if (remote_ != nullptr) {
        std::vector<const KvBlock*> ptrs;
        for (const auto& b : blocks) ptrs.push_back(b.block.get());
        PostRemotePush(std::move(saved->record), turn, std::move(ptrs));
      }
    }
    {
      MutexLock lock(&mu_);
      auto it = unsaved_.find(key);
      if (saved.ok() && it != unsaved_.end() && it->second.seq == seq) unsaved_.erase(it);
      SaveRan(key);
    }
    saves_cv_.NotifyAll();
  });
}

void AgentTiers::SaveRan(const AgentKey& key) {
  if (--saves_pending_[key] == 0) saves_pending_.erase(key);
}

void AgentTiers::WaitForSaves(const AgentKey& key) {
  MutexLock lock(&mu_);
  saves_cv_.Wait(&lock, [&] {
    mu_.AssertHeld();  // the predicate runs with the lock held
    return saves_pending_.count(key) == 0;
  });
}

bool AgentTiers::HasUnsaved(const AgentKey& key) const {
  MutexLock lock(&mu_);
  return unsaved_.count(key) != 0;
}

void AgentTiers::BeginErase(const AgentKey& key) {
  prompt_tokens_.Erase(key);  // it holds the agent's text
  (void)pool_.Erase(key);
  MutexLock lock(&mu_);
  erasing_.insert(key);  // no read may bring it back while its files go
  unsaved_.erase(key);
  reads_by_key_.erase(key);
}

bool AgentTiers::Erasing(const AgentKey& key) const {
  MutexLock lock(&mu_);
  return erasing_.count(key) != 0;
}

Status AgentTiers::EraseStored(const AgentKey& key, bool erase_disk, bool must_exist) {
  WaitForSaves(key);  // its queued saves land before it is erased
  Status result;
  if (erase_disk && store_ != nullptr) result = store_->DeleteAgent(key.ns, key.agent_id);
  if (result.code() == StatusCode::kNotFound) {
    result = must_exist ? Status::NotFound("agent '" + key.agent_id + "' not found") : Status::OK();
  }
  if (result.ok() && remote_ != nullptr) {
    remote_writes_.Flush();  // no push of this agent may land after its erasure
    if (Status r = remote_->Delete(key.ns, key.agent_id); !r.ok()) {
      result = Status::Unavailable("agent erased here, but not from the remote tier (retry): " + r.message());
    }
  }
  MutexLock lock(&mu_);
  erasing_.erase(key);
  reads_by_key_.erase(key);
  return result;
}

Status AgentTiers::EvictToDisk(const AgentKey& key) {
  WaitForSaves(key);  // its queued saves land before it is evicted
  return pool_.Contains(key) ? pool_.EvictToDisk(key) : Status::OK();
}

void AgentTiers::FillDiskBytes(const std::string& ns, api::AgentInfo* info) {
  if (store_ == nullptr) return;
  if (auto s = store_->GetSummary(ns, info->id); s.ok()) info->disk_bytes = static_cast<int64_t>(s->block_bytes);
}

std::vector<AgentSummary> AgentTiers::DiskAgents(const std::string& ns) {
  std::vector<AgentSummary> out;
  if (store_ == nullptr) return out;
  if (auto summaries = store_->ListAgents(ns); summaries.ok()) {
    for (auto& s : *summaries) {
      if (s.usable) out.push_back(std::move(s));
    }
  }
  return out;
}

std::optional<AgentSummary> AgentTiers::DiskAgent(const AgentKey& key) {
  if (store_ == nullptr) return std::nullopt;
  auto s = store_->GetSummary(key.ns, key.agent_id);
  if (!s.ok()) return std::nullopt;
  return std::move(s).value();
}

void AgentTiers::FillGauges(SchedulerMetrics::Gauges* g) const {
  g->io_pending = reads_.Pending() + saves_.Pending() + remote_writes_.Pending();
  {
    MutexLock lock(&mu_);
    g->unsaved_agents = unsaved_.size();
  }
  if (store_ != nullptr) {
    g->read_reserve_bytes = store_->read_reserve().HeldBytes();
    g->read_reserve_target_bytes = store_->read_reserve().TargetBytes();
  }
  if (landing_ != nullptr) {
    g->landing_page_locked_bytes = landing_->page_locked_bytes();
    g->landing_heap_bytes = landing_->heap_bytes();
  }
  const auto ps = pool_.Stats();
  g->hot_agents = ps.n_agents;
  g->hot_bytes = ps.used_bytes;
  g->hot_budget_bytes = ps.budget_bytes;
  g->agent_table_agents = table_.agents_gauge();
  g->agent_table_bytes = table_.bytes_gauge();
  g->agent_table_budget_bytes = table_.budget_bytes();
  if (store_ != nullptr) {
    const auto ss = store_->stats();
    g->warm_agents = ss.agents;
    g->warm_bytes = ss.disk_bytes;
    g->disk_out_of_space = ss.saves_out_of_space;
    g->disk_evictions_no_space = ss.agents_evicted_for_space;
    g->disk_evictions_budget = ss.agents_evicted - ss.agents_evicted_for_space;
  }
}

api::AgentInfo AgentTiers::InfoOf(const Agent& a, uint64_t slot_bytes_per_token) const {
  api::AgentInfo info;
  info.id = a.key.agent_id;
  info.tokens = static_cast<int64_t>(a.seq.tokens.size());
  info.busy = a.busy;
  info.last_used_unix_ms = a.last_use_ms;
  const uint64_t bpt = slot_bytes_per_token;  // a slot-only agent's bytes are slot rows
  auto pool_info = pool_.Info(a.key);
  const bool unsaved = HasUnsaved(a.key);  // its newest turn is in RAM only (save queued or failed)
  if (a.slot >= 0) {
    info.tier = api::CacheState::kResident;
  } else if (pool_info.ok() || unsaved) {
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
    info.shared_ram_bytes = static_cast<int64_t>(pool_info->shared_bytes);
  } else if (a.slot >= 0) {
    info.ram_bytes = info.tokens * static_cast<int64_t>(bpt);
  }
  return info;  // disk_bytes: FillDiskBytes, off the inference thread
}

std::string AgentTiers::RemoteMetricsText() const { return remote_ != nullptr ? remote_->RenderMetrics() : ""; }

}  // namespace agentkv::sched
