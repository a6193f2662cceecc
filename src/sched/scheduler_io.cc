// Scheduler, disk side: reads of agents and namespace indexes, write-behind
// saves. Everything here runs on the read or save executor (or an HTTP
// thread for admin calls), never on the inference thread, and hands its
// results to it through the maps guarded by mu_.
#include <algorithm>
#include <chrono>

#include "sched/scheduler.h"
#include "sched/scheduler_types.h"
#include "util/log.h"

namespace agentkv::sched {

uint64_t Scheduler::BeginAgentRead(const AgentKey& key, std::shared_ptr<ReadLanding::Ticket> landing) {
  AgentRead& in_flight = agent_reads_[key] = AgentRead{};
  in_flight.id = ++next_read_id_;
  in_flight.landing = std::move(landing);  // the in-flight entry's: a pipelined restore's source
  return in_flight.id;
}

void Scheduler::PostAgentRead(const AgentKey& key) {
  if (store_ == nullptr || agent_reads_.count(key)) return;
  std::shared_ptr<ReadLanding::Ticket> landing = landing_ != nullptr ? landing_->Reserve() : nullptr;
  // Pipelined restores (scheduler_pipelined.cc) stream the read, and hear
  // of its manifest as soon as it is read.
  if (landing != nullptr && pipelined_) landing->Stream([this] { WakeLoopForRead(); });
  const uint64_t id = BeginAgentRead(key, landing);
  reads_.Post([this, key, id, landing = std::move(landing)] {
    AgentRead read = ReadAgent(key, landing);
    if (landing != nullptr) landing->Abandon();  // a wait for rows that never came ends
    read.done = true;
    read.id = id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = agent_reads_.find(key);
      // Dropped meanwhile (a commit or delete made it stale, a cancelled
      // pipelined restore abandoned it), perhaps replaced by a newer read: discard.
      if (it != agent_reads_.end() && it->second.id == id) it->second = std::move(read);
    }
    WakeLoopForRead();
  });
}

void Scheduler::ReadFromStoreIndex(const AgentKey& key, uint64_t read_id) {
  // The store's in-memory index only: no file is read, and the store's lock
  // is never held across file I/O (store/agent_store.h), so this does not
  // wait for other agents' loads.
  auto summary = store_->GetSummary(key.ns, key.agent_id);
  const bool absent = !summary.ok() && summary.status().code() == StatusCode::kNotFound;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agent_reads_.find(key);
  // Dropped meanwhile (a commit or a delete: admission reads it if it must).
  if (it == agent_reads_.end() || it->second.id != read_id) return;
  if (absent) {
    it->second.done = true;  // the read's answer (no manifest, no blocks) without the read
    return;
  }
  agent_reads_.erase(it);
  PostAgentRead(key);
}

Scheduler::AgentRead Scheduler::ReadAgent(const AgentKey& key, const std::shared_ptr<ReadLanding::Ticket>& landing) {
  AgentRead read;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (deleting_.count(key)) return read;
    if (auto it = unsaved_.find(key); it != unsaved_.end()) {
      read.record = it->second.turn->record;
      read.blocks = it->second.turn->blocks;
      return read;
    }
  }
  const auto start = Clock::now();
  auto remote_read = [&](uint64_t newer_than) {
    if (!ReadAgentFromRemote(key, &read, newer_than)) return false;
    read.read_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    metrics_.ObserveRemoteFetch(read.read_ms);
    return true;
  };
  if (remote_ != nullptr) {
    // The local version first (the store's index, no file read), then the
    // remote manifest: if another server served the agent since this disk saw
    // it, its newer turn, with the blocks this disk holds read from here and
    // only the others fetched. Else the local load below: no byte is read twice.
    // (Manifests from before versions read as 0: any pushed version, >= 1, is newer.)
    auto summary = store_->GetSummary(key.ns, key.agent_id);
    if (!summary.ok() && summary.status().code() == StatusCode::kNotFound) {
      remote_read(0);
      return read;
    }
    if (summary.ok() && summary->usable && remote_read(std::max<uint64_t>(summary->version, 1))) return read;
  }
  auto loaded = store_->LoadBlocks(key.ns, key.agent_id, 0, landing.get());
  if (!loaded.ok()) {
    if (loaded.status().code() == StatusCode::kNotFound && remote_ != nullptr) {
      remote_read(0);  // erased here between the summary and the load
    } else if (loaded.status().code() != StatusCode::kNotFound) {
      AKV_LOG_WARN("read of agent %s failed: %s", key.agent_id.c_str(), loaded.status().ToString().c_str());
      if (loaded.status().code() == StatusCode::kCorruption) {
        metrics_.CountCorruption(1);
      } else {
        metrics_.CountReadFailure();
      }
    }
    return read;
  }
  if (!loaded->complete) {
    // A bad or missing block is corruption; an I/O error (EIO) is the disk's,
    // and the file stays for the next read.
    if (loaded->stop_reason.code() == StatusCode::kIOError) {
      AKV_LOG_WARN("read of agent %s stopped at %u tokens: %s", key.agent_id.c_str(), loaded->valid_tokens,
                   loaded->stop_reason.ToString().c_str());
      metrics_.CountReadFailure();
    } else {
      metrics_.CountCorruption(1);
    }
  }
  read.blocks.reserve(loaded->blocks.size());
  for (size_t i = 0; i < loaded->blocks.size(); ++i) {
    read.blocks.push_back({loaded->record.blocks[i].id, std::make_shared<KvBlock>(std::move(loaded->blocks[i]))});
  }
  read.record = std::move(loaded->record);
  read.from_disk = true;
  read.landing = landing;
  read.read_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  metrics_.ObserveDiskWait(read.read_ms);
  return read;
}

void Scheduler::PostNamespaceRead(const std::string& ns) {
  if (store_ == nullptr || ns_reading_.count(ns) || ns_index_.count(ns) || ns_merged_.count(ns)) return;
  ns_reading_.insert(ns);
  reads_.Post([this, ns] {
    ReadNamespaceIndex(ns);
    WakeLoopForRead();
  });
}

void Scheduler::WakeLoopForRead() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    read_completed_ = true;
  }
  cv_.notify_all();
}

void Scheduler::ReadNamespaceIndex(const std::string& ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ns_index_.count(ns) || ns_merged_.count(ns)) {  // read, or already in the agent table
      ns_reading_.erase(ns);
      return;
    }
  }
  std::vector<AgentRecord> records;
  if (store_ != nullptr) {
    if (auto list = store_->ListAgents(ns); list.ok()) {
      for (const auto& s : *list) {
        if (!s.usable) continue;
        if (auto rec = store_->GetRecord(ns, s.agent_id); rec.ok()) records.push_back(std::move(rec).value());
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  ns_reading_.erase(ns);
  ns_index_.emplace(ns, std::move(records));
}

void Scheduler::PostSave(const AgentKey& key, AgentRecord record, std::vector<PoolBlock> blocks, bool in_pool,
                         uint64_t pool_version) {
  auto turn = std::make_shared<const UnsavedTurn::Data>(UnsavedTurn::Data{std::move(record), std::move(blocks)});
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = ++next_save_seq_;
    SavePosted(key);
    unsaved_[key] = UnsavedTurn{turn, seq};
    agent_reads_.erase(key);  // a read of an older version is stale now
  }
  saves_.Post([this, key, seq, turn, in_pool, pool_version] {
    const std::vector<PoolBlock>& blocks = turn->blocks;
    auto saved = store_->SaveAgent(key.ns, turn->record, ProviderOfBlocks(blocks, "save"));
    if (!saved.ok()) {
      // The turn stays in unsaved_ (RAM): nothing is lost while the process lives.
      AKV_LOG_ERROR("save of agent %s failed: %s", key.agent_id.c_str(), saved.status().ToString().c_str());
      metrics_.CountSaveFailure();
    } else {
      if (in_pool) pool_.MarkClean(key, pool_version);
      if (remote_ != nullptr) {
        std::vector<const KvBlock*> ptrs;
        for (const auto& b : blocks) ptrs.push_back(b.block.get());
        PostRemotePush(std::move(saved->record), turn, std::move(ptrs));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = unsaved_.find(key);
      if (saved.ok() && it != unsaved_.end() && it->second.seq == seq) unsaved_.erase(it);
      SaveRan(key);
    }
    saves_cv_.notify_all();
  });
}

void Scheduler::SaveRan(const AgentKey& key) {
  if (--saves_pending_[key] == 0) saves_pending_.erase(key);
}

BlockProvider ProviderOfBlocks(const std::vector<PoolBlock>& blocks, const char* what) {
  return [&blocks, what](uint32_t index, const std::string& id) -> Result<KvBlock> {
    if (index >= blocks.size() || blocks[index].id != id) {
      return Status::Internal(std::string(what) + ": block not available");
    }
    return *blocks[index].block;
  };
}

void Scheduler::WaitForSaves(const AgentKey& key) {
  std::unique_lock<std::mutex> lock(mu_);
  saves_cv_.wait(lock, [&] { return saves_pending_.count(key) == 0; });
}

void Scheduler::FillDiskBytes(const std::string& ns, api::AgentInfo* info) {
  if (store_ == nullptr) return;
  if (auto s = store_->GetSummary(ns, info->id); s.ok()) info->disk_bytes = static_cast<int64_t>(s->block_bytes);
}

}  // namespace agentkv::sched
