// AgentTiers, remote side: fetching an agent another server saved (imported
// at once; its write-through to the local disk is queued on the save
// executor, so it lands before any later save of the agent and never delays
// the turn), and publishing this server's turns. Runs on the read executor (fetches) and the
// remote-writes executor (pushes), never on the inference thread. A remote
// failure only costs speed: the read falls back to cold, the push is dropped
// (the next turn publishes the agent again), both are counted and logged once
// per outage.
#include <chrono>

#include "sched/agent_tiers.h"
#include "util/log.h"

namespace agentkv::sched {

void AgentTiers::NoteRemoteOutcome(const Status& s, const char* what) {
  const bool failed = s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kIOError;
  if (failed && !remote_down_.exchange(true)) {
    AKV_LOG_WARN("remote tier %s: %s failed, carrying on without it (local tiers only): %s",
                 remote_->store()->Describe().c_str(), what, s.ToString().c_str());
  } else if (s.ok() && remote_down_.exchange(false)) {
    AKV_LOG_INFO("remote tier %s is back", remote_->store()->Describe().c_str());
  }
}

bool AgentTiers::ReadFromRemote(const AgentKey& key, AgentRead* read, uint64_t newer_than) {
  auto manifest = remote_->FetchManifest(key.ns, key.agent_id, newer_than);
  Result<RemoteFetch> fetched = manifest.status();
  if (manifest.ok()) {
    // Blocks are content-addressed: those this disk holds (an agent back on a
    // server it was on before: all but its last turns) are read from here.
    // A corrupt or vanished local file is simply fetched.
    std::vector<std::optional<KvBlock>> held;
    if (auto local = store_->ReadHeldBlocks(key.ns, *manifest); local.ok()) held = std::move(local).value();
    fetched = remote_->FetchBlocks(*manifest, std::move(held));
  }
  const StatusCode code = fetched.status().code();
  NoteRemoteOutcome(code == StatusCode::kNotFound || code == StatusCode::kAlreadyExists ? Status::OK()
                                                                                          : fetched.status(),
                    "fetch");
  if (!fetched.ok()) return false;
  LoadedAgent& got = fetched->loaded;
  // A newer remote copy that is damaged or partly evicted: the complete
  // local one is the safer start (prefix matching makes either correct).
  if (newer_than > 0 && !got.complete) return false;
  if (!got.complete && got.stop_reason.code() == StatusCode::kCorruption) metrics_.CountCorruption(1);
  {
    MutexLock lock(&mu_);
    if (erasing_.count(key)) return false;
  }
  read->blocks.reserve(got.blocks.size());
  for (size_t i = 0; i < got.blocks.size(); ++i) {
    read->blocks.push_back({got.record.blocks[i].id, std::make_shared<KvBlock>(std::move(got.blocks[i]))});
  }
  // SaveAgent writes only the block files the disk lacks: the fetched ones.
  if (got.complete) PostWriteThrough(key, got.record, read->blocks);
  read->record = std::move(got.record);
  read->from_disk = true;
  read->remote_manifest = true;
  read->from_remote = fetched->remote_blocks > 0;
  return true;
}

void AgentTiers::PostWriteThrough(const AgentKey& key, AgentRecord record, std::vector<PoolBlock> blocks) {
  {
    MutexLock lock(&mu_);
    SavePosted(key);  // an erasure waits for it (WaitForSaves)
  }
  saves_.Post([this, key, record = std::move(record), blocks = std::move(blocks)] {
    bool erased = false;
    {
      MutexLock lock(&mu_);
      erased = erasing_.count(key) != 0;
    }
    if (!erased) {
      // The remote record carries its version: the store's version rule holds
      // as for any save (a newer local turn is never replaced).
      auto saved = store_->SaveAgent(key.ns, record, ProviderOfBlocks(blocks, "remote write-through"));
      if (!saved.ok()) {
        AKV_LOG_WARN("remote write-through of agent %s failed: %s", key.agent_id.c_str(),
                     saved.status().ToString().c_str());
      }
    }
    {
      MutexLock lock(&mu_);
      SaveRan(key);
    }
    saves_cv_.NotifyAll();
  });
}

void AgentTiers::PostRemotePush(AgentRecord saved, std::shared_ptr<const void> keep_alive,
                               std::vector<const KvBlock*> blocks) {
  remote_writes_.Post([this, saved = std::move(saved), keep_alive = std::move(keep_alive), blocks = std::move(blocks)] {
    {
      MutexLock lock(&mu_);
      if (erasing_.count({saved.ns, saved.agent_id})) return;
    }
    const auto start = std::chrono::steady_clock::now();
    Status s = remote_->Push(saved, blocks);
    NoteRemoteOutcome(s, "write");
    if (s.ok()) {
      metrics_.ObserveRemotePush(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    } else if (s.code() != StatusCode::kUnavailable && s.code() != StatusCode::kIOError) {
      AKV_LOG_ERROR("remote write of agent %s failed: %s", saved.agent_id.c_str(), s.ToString().c_str());
    }
  });
}

}  // namespace agentkv::sched
