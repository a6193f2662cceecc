// AgentTiers, reads: agents' manifests and blocks, namespace indexes, and
// the read state the inference thread asks about. Reads run on the read
// executor; results are stored in reads_by_key_ under mu_ and announced by
// on_read_done.
#include "sched/agent_tiers.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "sched/slot_owners.h"
#include "store/manifest.h"
#include "util/log.h"
#include "util/warm_memory.h"

namespace agentkv::sched {

using Clock = std::chrono::steady_clock;

AgentTiers::AgentTiers(BlockPool& pool, AgentStore* store, RemoteTier* remote, SchedulerMetrics& metrics,
                       size_t prompt_token_cache_bytes, uint64_t agent_table_bytes,
                       std::unique_ptr<ReadLanding> landing, bool stream_reads, const SlotOwners* slots,
                       std::function<void()> on_read_done)
    : pool_(pool), store_(store), remote_(store != nullptr ? remote : nullptr), metrics_(metrics),
      prompt_tokens_(prompt_token_cache_bytes), table_(agent_table_bytes), landing_(std::move(landing)),
      stream_reads_(stream_reads), slots_(slots), on_read_done_(std::move(on_read_done)) {}

AgentTiers::~AgentTiers() { Flush(); }

void AgentTiers::Start(const std::vector<std::pair<size_t, size_t>>& reserve) {
  if (store_ == nullptr) return;
  // The load threads now, not in the first returning agent's read; and the
  // reserve their reads' tensors come from, faulted in before the first
  // request (which would otherwise queue behind it on reads_).
  std::promise<void> started;
  reads_.Post([this, &reserve, &started] {
    const auto fill_start = Clock::now();
    WarmMemory& memory = store_->read_reserve();
    memory.SetTargets(reserve);  // off: holds nothing
    store_->StartReadThreads([&memory](size_t reader, size_t n_readers) { memory.FillShare(reader, n_readers); });
    if (!reserve.empty()) {
      AKV_LOG_INFO("read reserve: %.1f MB of block memory faulted in (%.0f ms at start; --read-reserve)",
                   memory.HeldBytes() / 1e6,
                   std::chrono::duration<double, std::milli>(Clock::now() - fill_start).count());
    }
    started.set_value();
  });
  started.get_future().wait();
}

void AgentTiers::RefillReadReserveWhenIdle() {
  if (store_ == nullptr) return;
  WarmMemory& reserve = store_->read_reserve();
  if (reserve.HeldBytes() >= reserve.TargetBytes()) return;
  if (reserve_refill_posted_.exchange(true)) return;
  saves_.Post([this, &reserve] {
    reserve.FillShare(0, 1);
    reserve_refill_posted_ = false;
  });
}

void AgentTiers::Flush() {
  reads_.Flush();
  saves_.Flush();
  remote_writes_.Flush();
}

void AgentTiers::FlushSaves() {
  saves_.Flush();
  remote_writes_.Flush();
}

void AgentTiers::ReadDoneNotify() {
  reads_cv_.NotifyAll();
  on_read_done_();
}

uint64_t AgentTiers::BeginRead(const AgentKey& key, std::shared_ptr<ReadLanding::Ticket> landing) {
  AgentRead& in_flight = reads_by_key_[key] = AgentRead{};
  in_flight.id = ++next_read_id_;
  in_flight.landing = std::move(landing);  // the in-flight entry's: a pipelined restore's source
  return in_flight.id;
}

void AgentTiers::PostRead(const AgentKey& key) {
  if (store_ == nullptr || reads_by_key_.count(key)) return;
  std::shared_ptr<ReadLanding::Ticket> landing = landing_ != nullptr ? landing_->Reserve() : nullptr;
  // Pipelined restores stream the read, and hear of its manifest as soon as it is read.
  if (landing != nullptr && stream_reads_) landing->Stream([this] { ReadDoneNotify(); });
  const uint64_t id = BeginRead(key, landing);
  reads_.Post([this, key, id, landing = std::move(landing)] {
    AgentRead read = ReadAgent(key, landing);
    if (landing != nullptr) landing->Abandon();  // Final: a gate waiting for rows that never came gives up
    read.done = true;
    read.id = id;
    {
      MutexLock lock(&mu_);
      auto it = reads_by_key_.find(key);
      // Dropped meanwhile (a commit or delete made it stale, a cancelled
      // pipelined restore abandoned it), perhaps replaced by a newer read: discard.
      if (it != reads_by_key_.end() && it->second.id == id) it->second = std::move(read);
    }
    ReadDoneNotify();
  });
}

bool AgentTiers::BeginReadForSubmit(const AgentKey& key) {
  if (store_ == nullptr || (slots_ != nullptr && slots_->IsResident(key))) return false;
  std::optional<uint64_t> index_read;
  {
    MutexLock lock(&mu_);
    if (reads_by_key_.count(key) || pool_.Contains(key)) return false;
    if (remote_ == nullptr && !unsaved_.count(key)) {
      index_read = BeginRead(key, nullptr);
    } else {
      PostRead(key);
    }
  }
  if (index_read) ReadFromStoreIndex(key, *index_read);
  return true;
}

void AgentTiers::ReadFromStoreIndex(const AgentKey& key, uint64_t read_id) {
  // The store's in-memory index only: no file is read, and the store's lock
  // is never held across file I/O (store/agent_store.h), so this does not
  // wait for other agents' loads.
  auto summary = store_->GetSummary(key.ns, key.agent_id);
  const bool absent = !summary.ok() && summary.status().code() == StatusCode::kNotFound;
  {
    MutexLock lock(&mu_);
    auto it = reads_by_key_.find(key);
    // Dropped meanwhile (a commit or a delete: admission reads it if it must).
    if (it == reads_by_key_.end() || it->second.id != read_id) return;
    if (!absent) {
      reads_by_key_.erase(it);
      PostRead(key);
      return;
    }
    it->second.done = true;  // the read's answer (no manifest, no blocks) without the read
  }
  reads_cv_.NotifyAll();
}

void AgentTiers::DropRead(const AgentKey& key) {
  MutexLock lock(&mu_);
  reads_by_key_.erase(key);
}

ReadLookup AgentTiers::Lookup(const AgentKey& key, uint64_t known_version) {
  ReadLookup out;
  MutexLock lock(&mu_);
  auto it = reads_by_key_.find(key);
  if (it == reads_by_key_.end()) {
    PostRead(key);  // from disk, or from RAM if its save has not landed
    return out;
  }
  const AgentRead& r = it->second;
  out.landing = r.landing;
  if (!r.done) {
    out.kind = ReadLookup::Kind::kInFlight;
    return out;
  }
  out.kind = ReadLookup::Kind::kDone;
  out.read.done = true;
  out.read.id = r.id;
  out.read.blocks = r.blocks;  // shared blocks: no copy of the KV
  out.read.from_disk = r.from_disk;
  out.read.from_remote = r.from_remote;
  out.read.remote_manifest = r.remote_manifest;
  out.read.read_ms = r.read_ms;
  out.read.landing = r.landing;
  if (r.remote_manifest && r.record && r.record->version > known_version) out.read.record = r.record;
  return out;
}

std::optional<AgentRecord> AgentTiers::RecordOf(const AgentKey& key, bool early, bool* pending) {
  *pending = true;
  MutexLock lock(&mu_);
  auto it = reads_by_key_.find(key);
  if (it == reads_by_key_.end()) {
    PostRead(key);
    return std::nullopt;
  }
  if (!it->second.done) {
    // A pipelined restore starts from the manifest, read before the blocks.
    std::shared_ptr<const AgentRecord> rec;
    if (early && it->second.landing != nullptr) rec = it->second.landing->EarlyRecord();
    if (rec == nullptr) return std::nullopt;
    *pending = false;
    return *rec;
  }
  *pending = false;
  return it->second.record;
}

bool AgentTiers::ReadDone(const AgentKey& key) const {
  MutexLock lock(&mu_);
  auto it = reads_by_key_.find(key);
  return it == reads_by_key_.end() || it->second.done;
}

bool AgentTiers::WaitReadDone(const AgentKey& key, std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  return reads_cv_.WaitFor(&lock, timeout, [&] {
    mu_.AssertHeld();  // the predicate runs with the lock held
    auto it = reads_by_key_.find(key);
    return it == reads_by_key_.end() || it->second.done;
  });
}

std::optional<AgentRead> AgentTiers::TakeRead(const AgentKey& key) {
  MutexLock lock(&mu_);
  auto it = reads_by_key_.find(key);
  if (it == reads_by_key_.end() || !it->second.done) return std::nullopt;
  AgentRead read = std::move(it->second);
  reads_by_key_.erase(it);
  return read;
}

std::shared_ptr<const engine::PromptTokens> AgentTiers::PreviousPrompt(const AgentKey& key,
                                                                       std::chrono::milliseconds wait) {
  if (auto prev = prompt_tokens_.Get(key); prev != nullptr) return prev;
  MutexLock lock(&mu_);
  if (!reads_by_key_.count(key)) return nullptr;
  const bool done = reads_cv_.WaitFor(&lock, wait, [&] {
    mu_.AssertHeld();  // the predicate runs with the lock held
    auto it = reads_by_key_.find(key);
    return it == reads_by_key_.end() || it->second.done;
  });
  auto it = reads_by_key_.find(key);
  if (!done || it == reads_by_key_.end() || !it->second.record) return nullptr;
  const AgentRecord& r = *it->second.record;
  const PromptPrefix& p = r.prompt;
  // The store's own check of a record (its prompt inside its tokens and text).
  if (p.n_tokens == 0 || !CheckRecord(r, /*check_blocks=*/false).ok()) return nullptr;
  auto prev = std::make_shared<engine::PromptTokens>();
  prev->text = r.text.substr(0, p.text_bytes);
  for (const CharSpan& c : p.plain) prev->plain.push_back({c.begin, c.end});
  prev->tokenized.tokens.assign(r.tokens.begin(), r.tokens.begin() + p.n_tokens);
  for (uint32_t i = 0; i < p.n_tokens; ++i) prev->tokenized.spans.push_back({r.spans[i].begin, r.spans[i].end});
  return prev;
}

AgentRead AgentTiers::ReadAgent(const AgentKey& key, const std::shared_ptr<ReadLanding::Ticket>& landing) {
  AgentRead read;
  {
    MutexLock lock(&mu_);
    if (erasing_.count(key)) return read;
    if (auto it = unsaved_.find(key); it != unsaved_.end()) {
      read.record = it->second.turn->record;
      read.blocks = it->second.turn->blocks;
      return read;
    }
  }
  const auto start = Clock::now();
  auto remote_read = [&](uint64_t newer_than) {
    if (!ReadFromRemote(key, &read, newer_than)) return false;
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
  // A bad or missing block is corruption; an I/O error (EIO) is the disk's,
  // and the file stays for the next read; Unavailable is a save of this agent
  // that collected a block while it was read (no fault: the store's contract).
  if (!loaded->complete && loaded->stop_reason.code() != StatusCode::kUnavailable) {
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

void AgentTiers::PostNamespaceRead(const std::string& ns) {
  if (store_ == nullptr || ns_reading_.count(ns) || ns_index_.count(ns) || ns_merged_.count(ns)) return;
  ns_reading_.insert(ns);
  reads_.Post([this, ns] {
    ReadNamespaceIndex(ns);
    ReadDoneNotify();
  });
}

void AgentTiers::ReadNamespaceIndex(const std::string& ns) {
  {
    MutexLock lock(&mu_);
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
  MutexLock lock(&mu_);
  ns_reading_.erase(ns);
  ns_index_.emplace(ns, std::move(records));
}

std::vector<AgentRecord> AgentTiers::TakeNamespaceIndex(const std::string& ns, bool* ready) {
  *ready = true;
  std::vector<AgentRecord> records;
  if (store_ == nullptr) return records;
  MutexLock lock(&mu_);
  if (ns_merged_.count(ns)) return records;
  auto it = ns_index_.find(ns);
  if (it == ns_index_.end()) {
    PostNamespaceRead(ns);
    *ready = false;
    return records;
  }
  records = std::move(it->second);
  ns_index_.erase(it);
  ns_merged_.insert(ns);
  // An agent being erased must not come back.
  std::erase_if(records, [&](const AgentRecord& r) REQUIRES(mu_) { return erasing_.count({ns, r.agent_id}) != 0; });
  return records;
}

bool AgentTiers::NamespaceMerged(const std::string& ns) const {
  MutexLock lock(&mu_);
  return ns_merged_.count(ns) != 0;
}

bool AgentTiers::MergeNamespaceIndex(const std::string& ns) {
  bool ready = false;
  for (const auto& r : TakeNamespaceIndex(ns, &ready)) table_.AddFromRecord(r);  // a known agent is newer
  return ready;
}

bool AgentTiers::MayBeOnDisk(const AgentKey& key, bool named) const {
  if (store_ == nullptr) return false;
  // With a remote tier, an agent named by the client and unknown here may
  // live there even when this namespace's disk index was merged (an implicit
  // agent's new id cannot). Nor can an agent the table dropped from a merged one.
  return !NamespaceMerged(key.ns) || (named && (remote_ != nullptr || table_.Trimmed(key.ns)));
}

Agent* AgentTiers::LoadFromDisk(const AgentKey& key, bool early, bool* pending) {
  std::optional<AgentRecord> rec = RecordOf(key, early, pending);
  return rec ? &table_.AddFromRecord(*rec) : nullptr;
}

void AgentTiers::TrimTable(const std::set<AgentKey>& waiting) {
  const size_t dropped = table_.Trim([&](const Agent& a) {
    // Only what the disk holds whole: a slot, a pool copy or an unsaved turn
    // is newer than (or absent from) the disk; a pending fork has no manifest.
    // Without a store an agent outside the pool has no cache to lose.
    const bool disk_or_nothing = store_ == nullptr || a.on_disk || a.seq.tokens.empty();
    return !a.busy && a.slot < 0 && !a.fork_source && disk_or_nothing && !waiting.count(a.key) &&
           !pool_.Contains(a.key) && !HasUnsaved(a.key);
  });
  if (dropped > 0) metrics_.CountEviction("table", dropped);
}

}  // namespace agentkv::sched
