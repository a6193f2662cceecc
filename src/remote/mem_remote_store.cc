#include "remote/mem_remote_store.h"

#include "store/file_system.h"

namespace agentkv {

std::string MemRemoteStore::Key(const RemoteScope& scope, std::string_view name) {
  return scope.fingerprint + "/" + scope.ns + "/" + std::string(name);
}

Status MemRemoteStore::Enter(const char* op) {
  ++calls_;
  NoteFileAccess(op, "mem remote");  // a network call, held to the same thread rule as the disk
  if (!available_) return Status::Unavailable(std::string("mem remote: ") + op + ": unavailable");
  return Status::OK();
}

Result<std::vector<bool>> MemRemoteStore::BlocksExist(const RemoteScope& scope, std::span<const std::string> ids) {
  AGENTKV_RETURN_IF_ERROR(Enter("exists"));
  MutexLock l(&mu_);
  std::vector<bool> out;
  for (const auto& id : ids) out.push_back(blocks_.count(Key(scope, id)) != 0);
  return out;
}

Result<std::vector<std::optional<std::string>>> MemRemoteStore::GetBlocks(const RemoteScope& scope,
                                                                         std::span<const std::string> ids) {
  AGENTKV_RETURN_IF_ERROR(Enter("get"));
  blocks_requested_ += ids.size();
  MutexLock l(&mu_);
  std::vector<std::optional<std::string>> out;
  for (const auto& id : ids) {
    auto it = blocks_.find(Key(scope, id));
    out.push_back(it == blocks_.end() ? std::nullopt : std::optional<std::string>(it->second));
  }
  return out;
}

Result<uint32_t> MemRemoteStore::PutBlocksIfAbsent(const RemoteScope& scope,
                                                   std::span<const std::pair<std::string, std::string_view>> blocks) {
  AGENTKV_RETURN_IF_ERROR(Enter("put"));
  MutexLock l(&mu_);
  uint32_t n = 0;
  for (const auto& [id, bytes] : blocks) n += blocks_.emplace(Key(scope, id), std::string(bytes)).second;
  return n;
}

Status MemRemoteStore::DeleteBlocks(const RemoteScope& scope, std::span<const std::string> ids) {
  AGENTKV_RETURN_IF_ERROR(Enter("delete"));
  MutexLock l(&mu_);
  for (const auto& id : ids) blocks_.erase(Key(scope, id));
  return Status::OK();
}

Status MemRemoteStore::ClaimBlocks(const RemoteScope& scope, std::string_view agent_id,
                                   std::span<const std::string> ids) {
  AGENTKV_RETURN_IF_ERROR(Enter("claim"));
  MutexLock l(&mu_);
  auto& mine = agent_blocks_[Key(scope, agent_id)];
  for (const auto& id : ids) {
    mine.insert(id);
    block_agents_[Key(scope, id)].insert(std::string(agent_id));
  }
  return Status::OK();
}

Result<uint32_t> MemRemoteStore::ReleaseBlocks(const RemoteScope& scope, std::string_view agent_id,
                                               std::span<const std::string> keep, uint64_t if_version) {
  AGENTKV_RETURN_IF_ERROR(Enter("release"));
  MutexLock l(&mu_);
  if (if_version > 0) {
    auto m = manifests_.find(Key(scope, agent_id));
    if (m == manifests_.end() || m->second.bytes.empty() || m->second.version != if_version) return 0u;
  }
  const std::set<std::string> kept(keep.begin(), keep.end());
  auto& mine = agent_blocks_[Key(scope, agent_id)];
  uint32_t deleted = 0;
  for (auto it = mine.begin(); it != mine.end();) {
    if (kept.count(*it)) {
      ++it;
      continue;
    }
    const std::string bkey = Key(scope, *it);
    auto& agents = block_agents_[bkey];
    agents.erase(std::string(agent_id));
    if (agents.empty()) {
      block_agents_.erase(bkey);
      deleted += static_cast<uint32_t>(blocks_.erase(bkey));
    }
    it = mine.erase(it);
  }
  if (mine.empty()) agent_blocks_.erase(Key(scope, agent_id));
  return deleted;
}

Result<std::optional<RemoteManifest>> MemRemoteStore::GetManifest(const RemoteScope& scope, std::string_view agent_id) {
  AGENTKV_RETURN_IF_ERROR(Enter("get manifest"));
  MutexLock l(&mu_);
  auto it = manifests_.find(Key(scope, agent_id));
  if (it == manifests_.end()) return std::optional<RemoteManifest>();
  return std::optional<RemoteManifest>(it->second);
}

Result<bool> MemRemoteStore::PutManifestIfNewer(const RemoteScope& scope, std::string_view agent_id, uint64_t version,
                                                std::string_view bytes) {
  AGENTKV_RETURN_IF_ERROR(Enter("put manifest"));
  MutexLock l(&mu_);
  auto& m = manifests_[Key(scope, agent_id)];
  if (!m.bytes.empty() && m.version >= version) return false;
  m = RemoteManifest{version, std::string(bytes)};
  return true;
}

Status MemRemoteStore::DeleteManifest(const RemoteScope& scope, std::string_view agent_id) {
  AGENTKV_RETURN_IF_ERROR(Enter("delete manifest"));
  MutexLock l(&mu_);
  manifests_.erase(Key(scope, agent_id));
  return Status::OK();
}

Result<std::vector<RemoteManifest>> MemRemoteStore::ListManifests(const RemoteScope& scope) {
  AGENTKV_RETURN_IF_ERROR(Enter("list"));
  MutexLock l(&mu_);
  std::vector<RemoteManifest> out;
  for (const auto& [k, m] : manifests_) {
    const size_t a = k.find('/'), b = k.find('/', a + 1);
    const bool fp_ok = scope.fingerprint.empty() || k.substr(0, a) == scope.fingerprint;
    const bool ns_ok = scope.ns.empty() || k.substr(a + 1, b - a - 1) == scope.ns;
    if (fp_ok && ns_ok && !m.bytes.empty()) out.push_back(m);
  }
  return out;
}

}  // namespace agentkv
