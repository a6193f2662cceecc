// AgentStore: opening, rescanning and cleaning the disk state; erasure and
// the disk budget. The public read/write operations are in agent_store.cc
// and agent_store_load.cc.

#include <algorithm>
#include <chrono>
#include <map>

#include "store/agent_store.h"
#include "store/block_file.h"
#include "store/durable_io.h"
#include "store/manifest.h"
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

constexpr std::string_view kManifestSuffix = ".json";
constexpr std::string_view kBlockSuffix = ".safetensors";

// "<32 hex><suffix>" -> the 32 hex digits, or "".
std::string HashedName(std::string_view name, std::string_view suffix) {
  if (name.size() != kBlockIdChars + suffix.size() || !EndsWith(name, suffix)) return "";
  std::string_view head = name.substr(0, kBlockIdChars);
  return IsBlockId(head) ? std::string(head) : "";
}

// ListDir that reads a missing directory as empty.
Result<std::vector<DirEntry>> ListOrEmpty(FileSystem* fs, const std::string& dir) {
  auto r = fs->ListDir(dir);
  if (!r.ok() && r.status().code() == StatusCode::kNotFound) return std::vector<DirEntry>{};
  return r;
}

// Refuses a cache directory another user could write in, or a link planted
// where one goes (docs/store-format.md, "Permissions"); a missing one is fine.
Status CheckDirIfPresent(FileSystem* fs, const std::string& dir) {
  Status st = fs->CheckPrivateDir(dir);
  return st.code() == StatusCode::kNotFound ? Status::OK() : st;
}

}  // namespace

AgentStore::AgentStore(AgentStoreOptions options)
    : options_(std::move(options)),
      fs_(options_.fs ? options_.fs : DefaultFileSystem()),
      reader_(fs_, options_.read_threads, options_.read_chunk_bytes),
      root_(JoinPath(options_.cache_dir, options_.fingerprint)) {}

AgentStore::~AgentStore() = default;

Result<std::unique_ptr<AgentStore>> AgentStore::Open(AgentStoreOptions options) {
  AGENTKV_RETURN_IF_ERROR(ValidateName("fingerprint", options.fingerprint).WithContext("open store"));
  if (options.cache_dir.empty()) return Status::InvalidArgument("open store: empty cache_dir");
  if (!IsHeaderText(options.kv_types)) return Status::InvalidArgument("open store: bad kv_types");
  std::unique_ptr<AgentStore> store(new AgentStore(std::move(options)));
  MutexLock save_lock(&store->save_mu_);  // the budget's evictions below, as in a save
  MutexLock l(&store->mu_);
  const std::string lock_path = CacheLockPath(store->options_.cache_dir);
  if (!store->options_.read_only) {
    AGENTKV_RETURN_IF_ERROR(CreateDirsDurably(store->fs_, store->root_, ParentDir(store->options_.cache_dir)).WithContext("open store"));
    // Before the scan, which deletes files another writer may still need.
    auto lock = store->fs_->LockFile(lock_path);
    if (!lock.ok() && lock.status().code() == StatusCode::kFailedPrecondition) {
      return Status::FailedPrecondition("open store: cache dir " + store->options_.cache_dir +
                                        " is in use by another agentkv process (it holds " + lock_path +
                                        "); stop it or use another cache dir");
    }
    if (!lock.ok()) return lock.status().WithContext("open store");
    store->lock_ = std::move(lock).value();
  } else {
    auto held = store->fs_->IsLockHeld(lock_path);
    if (!held.ok()) return held.status().WithContext("open store");
    store->live_ = *held;
  }
  // Before anything is read or written below it: a directory that another
  // user owns or may write in would let them read or plant conversations.
  for (const std::string& dir : {store->options_.cache_dir, store->root_}) {
    AGENTKV_RETURN_IF_ERROR(CheckDirIfPresent(store->fs_, dir).WithContext("open store: unsafe cache dir"));
  }
  AGENTKV_RETURN_IF_ERROR(store->ScanAllLocked().WithContext("open store " + store->root_));
  if (!store->options_.read_only) {
    uint32_t evicted = 0;
    AGENTKV_RETURN_IF_ERROR(store->EnforceBudgetLocked(nullptr, "", &evicted).WithContext("open store"));
    store->RemovePendingFiles(l);
  }
  return store;
}

std::string CacheLockPath(const std::string& cache_dir) { return JoinPath(cache_dir, "LOCK"); }

int64_t AgentStore::NowMs() const {
  if (options_.now_ms) return options_.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string AgentStore::ManifestPath(const NamespaceState& ns, std::string_view agent_id) const {
  return AgentsDir(ns) + "/" + NameHash(agent_id) + std::string(kManifestSuffix);
}

std::string AgentStore::BlockPath(const NamespaceState& ns, std::string_view block_id) const {
  return BlocksDir(ns) + "/" + std::string(block_id) + std::string(kBlockSuffix);
}

Status AgentStore::ScanAllLocked() {
  AGENTKV_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListOrEmpty(fs_, root_));
  std::vector<NamespaceState> scanned;
  for (const DirEntry& e : entries) {
    if (!IsBlockId(e.name)) continue;  // not ours: leave it alone
    // A link or file where a namespace directory goes is refused, not
    // skipped: the first save into that namespace would write through it.
    AGENTKV_RETURN_IF_ERROR(fs_->CheckPrivateDir(root_ + "/" + e.name).WithContext("unsafe cache dir"));
    if (!e.is_dir) continue;
    NamespaceState ns;
    ns.dir = root_ + "/" + e.name;
    AGENTKV_RETURN_IF_ERROR(ScanNamespaceLocked(&ns));
    if (ns.name.empty()) continue;  // no valid manifest: nothing to serve
    scanned.push_back(std::move(ns));
  }
  index_.Reset(std::move(scanned));
  return Status::OK();
}

Status AgentStore::ScanNamespaceLocked(NamespaceState* ns) {
  const bool ro = options_.read_only;
  const std::string agents_dir = AgentsDir(*ns), blocks_dir = BlocksDir(*ns);
  for (const std::string& dir : {agents_dir, blocks_dir, QuarantineDir(*ns)}) {
    AGENTKV_RETURN_IF_ERROR(CheckDirIfPresent(fs_, dir).WithContext("unsafe cache dir"));
  }
  // After this fsync, what we see in agents/ is what a crash would keep, so
  // blocks unreferenced by it are safe to delete.
  if (!ro) AGENTKV_RETURN_IF_ERROR(SyncDirIfPresent(fs_, agents_dir));
  ns->agents.clear();
  ns->blocks.clear();
  std::map<std::string, BlockRef> known;  // block id -> a manifest's view of it

  AGENTKV_ASSIGN_OR_RETURN(std::vector<DirEntry> agent_files, ListOrEmpty(fs_, agents_dir));
  for (const DirEntry& e : agent_files) {
    const std::string path = agents_dir + "/" + e.name;
    if (e.is_dir) continue;
    if (EndsWith(e.name, kTempSuffix)) {
      // A save writing without the lock owns its temp files.
      if (!ro && ns->writes_in_flight == 0 && fs_->RemoveFile(path).ok()) ++stats_.temp_files_removed;
      continue;
    }
    std::string hash = HashedName(e.name, kManifestSuffix);
    if (hash.empty()) continue;
    auto bytes = fs_->ReadFile(path);
    if (!bytes.ok()) {
      if (bytes.status().code() == StatusCode::kNotFound) continue;
      return bytes.status();
    }
    auto rec = DecodeManifest(*bytes);
    Status st = rec.ok() ? Status::OK() : rec.status();
    if (st.ok()) {
      if (!ValidateName("namespace", rec->ns).ok() || !ValidateName("agent id", rec->agent_id).ok() ||
          NameHash(rec->agent_id) != hash || NameHash(rec->ns) != BaseName(ns->dir) ||
          (!ns->name.empty() && ns->name != rec->ns)) {
        st = Status::Corruption("manifest in the wrong place");
      } else if (rec->fingerprint != options_.fingerprint) {
        st = Status::Corruption("manifest of another model fingerprint");
      }
    }
    if (!st.ok()) {
      AKV_LOG_WARN("store: %s: %s", path.c_str(), st.ToString().c_str());
      ++stats_.corrupt_manifests;
      QuarantineLocked(ns, path);
      continue;
    }
    ns->name = rec->ns;
    for (const BlockRef& b : rec->blocks) known.emplace(b.id, b);
    ns->agents[rec->agent_id] = StateOfManifest(*rec, bytes->size());
  }

  AGENTKV_ASSIGN_OR_RETURN(std::vector<DirEntry> block_files, ListOrEmpty(fs_, blocks_dir));
  for (const DirEntry& e : block_files) {
    const std::string path = blocks_dir + "/" + e.name;
    if (e.is_dir) continue;
    if (EndsWith(e.name, kTempSuffix)) {
      // A save writing without the lock owns its temp files.
      if (!ro && ns->writes_in_flight == 0 && fs_->RemoveFile(path).ok()) ++stats_.temp_files_removed;
      continue;
    }
    std::string id = HashedName(e.name, kBlockSuffix);
    if (id.empty()) continue;
    BlockState b;
    auto it = known.find(id);
    if (it != known.end()) {
      b.file_bytes = it->second.file_bytes;
      b.checksum = it->second.checksum;
    }
    b.durable = true;
    ns->blocks[id] = b;
  }
  StoreIndex::RecountRefs(ns);
  if (!ro) {
    for (auto it = ns->blocks.begin(); it != ns->blocks.end();) {
      if (it->second.refs > 0 || ns->writes_in_flight > 0) {  // an in-flight save's blocks are not named yet
        ++it;
        continue;
      }
      if (fs_->RemoveFile(BlockPath(*ns, it->first)).ok()) ++stats_.orphan_blocks_removed;
      it = ns->blocks.erase(it);
    }
    AGENTKV_RETURN_IF_ERROR(SyncDirIfPresent(fs_, blocks_dir));
  }
  ns->dirs_ready = false;
  ns->dirty = false;
  return Status::OK();
}

AgentStore::AgentState AgentStore::StateOfManifest(const AgentRecord& rec, uint64_t manifest_bytes) const {
  return StoreIndex::AgentOfManifest(rec, manifest_bytes, options_.kv_types.empty() || options_.kv_types == rec.kv_types);
}

Status AgentStore::CleanIfDirtyLocked(NamespaceState* ns) {
  if (!ns->dirty) return Status::OK();
  ns->dirty = true;  // stays dirty until a scan succeeds
  return ScanNamespaceLocked(ns).WithContext("rescan namespace " + ns->name);
}

void AgentStore::QuarantineLocked(NamespaceState* ns, const std::string& path) {
  if (options_.read_only) return;
  const std::string qdir = QuarantineDir(*ns);
  const std::string dest =
      qdir + "/" + BaseName(path) + "." + std::to_string(NowMs()) + "-" + std::to_string(++quarantine_seq_);
  Status st = CreateDirsDurably(fs_, qdir, ns->dir);
  if (st.ok()) st = fs_->RenameFile(path, dest);
  if (!st.ok()) {
    AKV_LOG_WARN("store: cannot quarantine %s (%s); deleting it", path.c_str(), st.ToString().c_str());
    (void)fs_->RemoveFile(path);
  }
  ++stats_.quarantined_files;
}

uint32_t AgentStore::CollectGarbageLocked(NamespaceState* ns, bool erasure) {
  uint32_t n = 0;
  for (auto it = ns->blocks.begin(); it != ns->blocks.end();) {
    if (it->second.refs > 0) {
      ++it;
      continue;
    }
    removals_.Add({ns->name, BlockPath(*ns, it->first), erasure ? BlocksDir(*ns) : "", true});
    ++n;
    it = ns->blocks.erase(it);
  }
  return n;
}

// `l` is the caller's lock on mu_, released here around the file work: the
// analysis cannot follow a lock passed in, so it checks the callers
// (REQUIRES(mu_, save_mu_) on the declaration) and not this body.
uint32_t AgentStore::RemovePendingFiles(MutexLock& l, Status* erasure) NO_THREAD_SAFETY_ANALYSIS {
  if (removals_.empty()) return 0;
  const std::vector<FileRemovals::Removal> taken = removals_.Take();
  l.Unlock();
  const FileRemovals::Outcome out = FileRemovals::Run(fs_, taken);
  l.Lock();
  for (const FileRemovals::Failure& f : out.failures) {
    if (NamespaceState* ns = index_.Find(f.ns)) ns->dirty = true;  // the rescan retries
    if (erasure != nullptr && erasure->ok() && f.durable) *erasure = f.status.WithContext("remove " + f.path);
  }
  return out.blocks_removed;
}

Status AgentStore::DeleteAgentLocked(NamespaceState* ns, const std::string& agent_id) {
  auto it = ns->agents.find(agent_id);
  if (it == ns->agents.end()) return Status::NotFound("delete agent " + agent_id + ": not found");
  const std::string agents_dir = AgentsDir(*ns);
  ++manifest_changes_;  // before the removal: a load reading it meanwhile sees the change
  Status st = fs_->RemoveFile(ManifestPath(*ns, agent_id));
  if (st.code() == StatusCode::kNotFound) st = Status::OK();
  // The removal must be durable before any of its blocks goes: a manifest
  // that comes back after a crash must find all its blocks.
  if (st.ok()) st = fs_->SyncDir(agents_dir);
  if (!st.ok()) {
    ns->dirty = true;
    return st.WithContext("delete agent " + agent_id);
  }
  std::vector<std::string> freed;
  AgentState gone = std::move(it->second);
  ns->agents.erase(it);
  StoreIndex::RecountRefs(ns);
  for (const BlockRef& b : gone.blocks) {
    auto bit = ns->blocks.find(b.id);
    if (bit == ns->blocks.end() || bit->second.refs == 0) freed.push_back(b.id);
  }
  // The freed blocks' files go (and blocks/ is fsynced) once the caller
  // releases mu_: RemovePendingFiles.
  CollectGarbageLocked(ns, /*erasure=*/true);
  // Erasure covers quarantined copies of its own data too.
  freed.push_back(NameHash(agent_id));
  auto q = fs_->ListDir(QuarantineDir(*ns));
  if (q.ok()) {
    for (const DirEntry& e : *q) {
      for (const std::string& prefix : freed) {
        if (e.name.compare(0, prefix.size(), prefix) == 0) {
          (void)fs_->RemoveFile(QuarantineDir(*ns) + "/" + e.name);
          break;
        }
      }
    }
  }
  return Status::OK();
}

Status AgentStore::EnforceNamespaceBudgetLocked(NamespaceState* ns, std::string_view keep_id, uint32_t* evicted) {
  for (;;) {
    uint64_t total = 0;
    NamespaceState* victim_ns = nullptr;
    std::string id;
    const bool found = index_.PickLruVictim(ns, keep_id, &victim_ns, &id, &total, ns);
    if (total <= options_.disk_budget_per_ns_bytes || !found) return Status::OK();
    AGENTKV_RETURN_IF_ERROR(CleanIfDirtyLocked(victim_ns).WithContext("namespace disk budget"));
    if (!victim_ns->agents.count(id)) continue;  // the rescan changed the picture
    AKV_LOG_INFO("store: namespace disk budget: evicting agent %s/%s", victim_ns->name.c_str(), id.c_str());
    AGENTKV_RETURN_IF_ERROR(DeleteAgentLocked(victim_ns, id).WithContext("namespace disk budget"));
    ++*evicted;
    ++stats_.agents_evicted;
  }
}

Status AgentStore::EnforceBudgetLocked(const NamespaceState* keep_ns, std::string_view keep_id,
                                       uint32_t* evicted) {
  if (options_.disk_budget_per_ns_bytes > 0) {
    // A save: its own namespace only (the others did not grow). Open: all.
    for (NamespaceState* ns : index_.All()) {
      if (keep_ns != nullptr && ns != keep_ns) continue;
      AGENTKV_RETURN_IF_ERROR(EnforceNamespaceBudgetLocked(ns, ns == keep_ns ? keep_id : "", evicted));
    }
  }
  if (options_.disk_budget_bytes == 0) return Status::OK();
  for (;;) {
    uint64_t total = 0;
    NamespaceState* victim_ns = nullptr;
    std::string id;
    const bool found = index_.PickLruVictim(keep_ns, keep_id, &victim_ns, &id, &total);
    if (total <= options_.disk_budget_bytes || !found) return Status::OK();
    AGENTKV_RETURN_IF_ERROR(CleanIfDirtyLocked(victim_ns).WithContext("disk budget"));
    if (!victim_ns->agents.count(id)) continue;  // the rescan changed the picture
    AKV_LOG_INFO("store: disk budget: evicting agent %s/%s", victim_ns->name.c_str(), id.c_str());
    AGENTKV_RETURN_IF_ERROR(DeleteAgentLocked(victim_ns, id).WithContext("disk budget"));
    ++*evicted;
    ++stats_.agents_evicted;
  }
}

Result<bool> AgentStore::EvictForSpaceLocked(std::string_view keep_ns_name, std::string_view keep_id) {
  // Failed saves leave their files behind (temp files, blocks no manifest
  // names): the rescans of dirty namespaces remove them first.
  for (NamespaceState* ns : index_.All()) {
    AGENTKV_RETURN_IF_ERROR(CleanIfDirtyLocked(ns).WithContext("make room"));
  }
  const NamespaceState* keep_ns = index_.Find(keep_ns_name);
  NamespaceState* victim_ns = nullptr;
  std::string id;
  if (!index_.PickLruVictim(keep_ns, keep_id, &victim_ns, &id, nullptr)) return false;
  AKV_LOG_WARN("store: disk full: evicting agent %s/%s to make room for %s", victim_ns->name.c_str(), id.c_str(),
               std::string(keep_id).c_str());
  AGENTKV_RETURN_IF_ERROR(DeleteAgentLocked(victim_ns, id).WithContext("make room"));
  ++stats_.agents_evicted;
  ++stats_.agents_evicted_for_space;
  return true;
}

}  // namespace agentkv
