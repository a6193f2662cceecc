// AgentStore: the public read and write operations but the load path (agent_store_load.cc; see agent_store.h).

#include "store/agent_store.h"

#include <algorithm>
#include <optional>

#include "store/block_belongs.h"
#include "store/block_file.h"
#include "store/block_read.h"
#include "store/durable_io.h"
#include "store/manifest.h"
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv {
namespace {

// Tokens block i of the record covers (the last block may be partial).
uint32_t BlockTokensAt(const AgentRecord& rec, uint32_t i) {
  return static_cast<uint32_t>(std::min<size_t>(kBlockTokens, rec.tokens.size() - size_t{i} * kBlockTokens));
}

}  // namespace

Status AgentStore::ValidateIds(std::string_view ns, std::string_view agent_id) {
  AGENTKV_RETURN_IF_ERROR(ValidateName("namespace", ns));
  return ValidateName("agent id", agent_id);
}

Result<AgentStore::NamespaceState*> AgentStore::PrepareLocked(std::string_view ns) {
  NamespaceState* state = index_.Find(ns);
  if (state != nullptr) AGENTKV_RETURN_IF_ERROR(CleanIfDirtyLocked(state));
  return state;
}

std::vector<std::string> AgentStore::ListNamespaces() {
  MutexLock l(&mu_);
  return index_.NamesWithAgents();
}

Result<std::vector<AgentSummary>> AgentStore::ListAgents(std::string_view ns_name) {
  AGENTKV_RETURN_IF_ERROR(ValidateName("namespace", ns_name));
  MutexLock l(&mu_);
  AGENTKV_ASSIGN_OR_RETURN(NamespaceState * ns, PrepareLocked(ns_name));
  std::vector<AgentSummary> out;
  if (ns == nullptr) return out;
  for (const auto& [id, a] : ns->agents) out.push_back(StoreIndex::Summary(*ns, id, a));
  return out;
}

Result<AgentSummary> AgentStore::GetSummary(std::string_view ns_name, std::string_view agent_id) {
  AGENTKV_RETURN_IF_ERROR(ValidateIds(ns_name, agent_id));
  MutexLock l(&mu_);
  AGENTKV_ASSIGN_OR_RETURN(NamespaceState * ns, PrepareLocked(ns_name));
  if (ns != nullptr) {
    auto it = ns->agents.find(std::string(agent_id));
    if (it != ns->agents.end()) return StoreIndex::Summary(*ns, it->first, it->second);
  }
  return Status::NotFound("agent " + std::string(agent_id) + ": not found");
}

Status AgentStore::CheckReadableLocked(const NamespaceState& ns, const std::string& agent_id) const {
  auto it = ns.agents.find(agent_id);
  if (it == ns.agents.end()) return Status::NotFound("agent " + agent_id + ": not found");
  if (!it->second.usable) {
    return Status::FailedPrecondition("agent " + agent_id + ": saved with kv types " + it->second.kv_types +
                                      ", store uses " + options_.kv_types);
  }
  return Status::OK();
}

Result<AgentRecord> AgentStore::DecodeRecordLocked(NamespaceState* ns, const std::string& agent_id,
                                                   Result<std::string> bytes, std::optional<uint64_t> stamp) {
  const std::string path = ManifestPath(*ns, agent_id);
  auto decoded = bytes.ok() ? DecodeManifest(*bytes) : Result<AgentRecord>(bytes.status());
  if (stamp && (*stamp != manifest_changes_ || !ns->agents.count(agent_id))) {
    // Read without the lock while a save or delete changed the manifests: a
    // good record of this agent is still a manifest it had (the caller checks
    // it against the index); anything else is no fault of the file.
    if (!ns->agents.count(agent_id)) return Status::NotFound("agent " + agent_id + ": not found");
    if (decoded.ok() && decoded->agent_id == agent_id && decoded->ns == ns->name &&
        decoded->fingerprint == options_.fingerprint) {
      return decoded;
    }
    return Status::Unavailable("read agent " + agent_id + ": its manifest was replaced while it was read");
  }
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kNotFound) ns->dirty = true;  // vanished under us
    return bytes.status().WithContext("read agent " + agent_id);
  }
  Result<AgentRecord>& rec = decoded;
  Status st = rec.ok() ? Status::OK() : rec.status();
  if (st.ok() && (rec->agent_id != agent_id || rec->ns != ns->name || rec->fingerprint != options_.fingerprint)) {
    st = Status::Corruption("manifest names another agent or model");
  }
  if (!st.ok()) {
    AKV_LOG_WARN("store: %s: %s", path.c_str(), st.ToString().c_str());
    ++stats_.corrupt_manifests;
    QuarantineLocked(ns, path);
    // Its blocks are released by the rescan, after an fsync of agents/.
    ns->agents.erase(agent_id);
    ns->dirty = !options_.read_only;
    return st.WithContext("read agent " + agent_id);
  }
  return std::move(rec).value();
}

Result<AgentRecord> AgentStore::ReadRecordLocked(NamespaceState* ns, const std::string& agent_id) {
  AGENTKV_RETURN_IF_ERROR(CheckReadableLocked(*ns, agent_id));
  return DecodeRecordLocked(ns, agent_id, fs_->ReadFile(ManifestPath(*ns, agent_id)), std::nullopt);
}

Result<AgentRecord> AgentStore::GetRecord(std::string_view ns_name, std::string_view agent_id) {
  AGENTKV_RETURN_IF_ERROR(ValidateIds(ns_name, agent_id));
  const std::string id(agent_id);
  NamespaceState* ns = nullptr;
  uint64_t stamp = 0;
  {
    MutexLock l(&mu_);
    AGENTKV_ASSIGN_OR_RETURN(ns, PrepareLocked(ns_name));
    if (ns == nullptr) return Status::NotFound("agent " + id + ": not found");
    AGENTKV_RETURN_IF_ERROR(CheckReadableLocked(*ns, id));
    stamp = manifest_changes_;
  }
  // Read without the lock (ns->dir is immutable; a manifest is replaced by
  // rename, so this reads the old or the new file), checked under it.
  Result<std::string> bytes = fs_->ReadFile(ManifestPath(*ns, id));
  MutexLock l(&mu_);
  return DecodeRecordLocked(ns, id, std::move(bytes), stamp);
}

Result<KvBlock> AgentStore::ReadBlockLocked(NamespaceState* ns, const AgentRecord& rec, uint32_t i,
                                            std::optional<Result<DecodedBlock>> read) {
  const BlockRef& ref = rec.blocks[i];
  const std::string where = "block " + std::to_string(i) + " (" + ref.id + ")";
  auto bit = ns->blocks.find(ref.id);
  if (bit == ns->blocks.end()) {
    ++stats_.missing_blocks;
    return Status::NotFound(where + ": missing");
  }
  const std::string path = BlockPath(*ns, ref.id);
  Result<DecodedBlock> dec = read ? std::move(*read) : ReadBlockFile(fs_, path);
  if (!dec.ok() && dec.status().code() != StatusCode::kCorruption) {
    if (dec.status().code() == StatusCode::kNotFound) {
      ++stats_.missing_blocks;
      ns->blocks.erase(bit);
    }
    return dec.status().WithContext(where);  // an I/O error is not the block's fault: keep it
  }
  Status st = dec.ok() ? Status::OK() : dec.status();
  if (st.ok()) st = CheckBlockBelongs(*dec, rec, i, options_.fingerprint);
  if (!st.ok()) {
    const std::string why = st.ToString();  // names the file unless CheckBlockBelongs failed
    AKV_LOG_WARN("store: %s%s", why.find(path) == std::string::npos ? (path + ": ").c_str() : "", why.c_str());
    ++stats_.corrupt_blocks;
    if (!options_.read_only) {
      QuarantineLocked(ns, path);
      ns->blocks.erase(bit);
    }
    return st.WithContext(where);
  }
  return std::move(dec->block);
}

Result<VerifyReport> AgentStore::VerifyAgent(std::string_view ns_name, std::string_view agent_id) {
  AGENTKV_RETURN_IF_ERROR(ValidateIds(ns_name, agent_id));
  MutexLock l(&mu_);
  AGENTKV_ASSIGN_OR_RETURN(NamespaceState * ns, PrepareLocked(ns_name));
  if (ns == nullptr) return Status::NotFound("agent " + std::string(agent_id) + ": not found");
  VerifyReport rep;
  rep.ns = std::string(ns_name);
  rep.agent_id = std::string(agent_id);
  auto rec = ReadRecordLocked(ns, rep.agent_id);
  if (!rec.ok()) {
    if (rec.status().code() != StatusCode::kCorruption) return rec.status();
    rep.problems.push_back(rec.status().ToString());
    return rep;
  }
  rep.n_tokens = static_cast<uint32_t>(rec->tokens.size());
  rep.n_blocks = static_cast<uint32_t>(rec->blocks.size());
  bool prefix = true;
  for (uint32_t i = 0; i < rep.n_blocks; ++i) {
    auto block = ReadBlockLocked(ns, *rec, i);
    if (block.ok()) {
      ++rep.n_ok;
      if (prefix) rep.valid_tokens += block->n_tokens;
      continue;
    }
    prefix = false;
    if (block.status().code() == StatusCode::kNotFound) {
      ++rep.n_missing;
    } else if (block.status().code() == StatusCode::kCorruption) {
      ++rep.n_corrupt;
    } else {
      return block.status();
    }
    rep.problems.push_back(block.status().ToString());
  }
  return rep;
}

Result<AgentStore::WrittenBlock> AgentStore::WriteBlockFile(const NamespaceState& ns, const AgentRecord& rec,
                                                           const std::vector<std::string>& ids, uint32_t i,
                                                           const BlockProvider& provider) {
  const uint32_t n_tokens = BlockTokensAt(rec, i);
  auto block = provider(i, ids[i]);
  if (!block.ok()) return block.status().WithContext("block " + std::to_string(i));
  if (block->index != i || block->n_tokens != n_tokens) {
    return Status::InvalidArgument("block " + std::to_string(i) + ": provider returned index " +
                                   std::to_string(block->index) + ", n_tokens " + std::to_string(block->n_tokens));
  }
  BlockMeta meta{ids[i], i == 0 ? "" : ids[i - 1], rec.fingerprint, rec.kv_types, 0};
  AGENTKV_ASSIGN_OR_RETURN(auto enc, EncodeBlockHeader(*block, meta));
  AGENTKV_RETURN_IF_ERROR(WritePiecesAtomically(fs_, BlockPath(ns, ids[i]), enc.Pieces(*block), /*sync_dir=*/false));
  return WrittenBlock{ids[i], enc.checksum, enc.file_bytes};
}

Status AgentStore::CheckNotStaleLocked(NamespaceState* ns, AgentRecord* rec) {
  auto it = ns->agents.find(rec->agent_id);
  if (it == ns->agents.end()) {
    if (rec->version == 0) rec->version = 1;
    return Status::OK();
  }
  const uint64_t on_disk = it->second.version;
  if (rec->version == 0) {
    rec->version = on_disk + 1;
    return Status::OK();
  }
  const std::string stale = "stale save: version " + std::to_string(rec->version) + " ";
  if (rec->version < on_disk) {
    return Status::FailedPrecondition(stale + "is older than version " + std::to_string(on_disk) + " on disk");
  }
  if (rec->version > on_disk) return Status::OK();
  // The same version again: only a retry of the same content may rewrite it.
  AGENTKV_ASSIGN_OR_RETURN(AgentRecord disk, ReadRecordLocked(ns, rec->agent_id));
  if (disk.text != rec->text || disk.tokens != rec->tokens || disk.spans != rec->spans ||
      disk.kv_types != rec->kv_types || disk.layout_version != rec->layout_version) {
    return Status::FailedPrecondition(stale + "is on disk with other content");
  }
  return Status::OK();
}

Result<SaveResult> AgentStore::SaveAgent(std::string_view ns_name, const AgentRecord& in,
                                         const BlockProvider& provider) {
  AGENTKV_RETURN_IF_ERROR(ValidateIds(ns_name, in.agent_id).WithContext("save agent"));
  const std::string where = "save agent " + in.agent_id;
  if (options_.read_only) return Status::FailedPrecondition(where + ": store is read-only");
  if (!in.ns.empty() && in.ns != ns_name) return Status::InvalidArgument(where + ": record is of another namespace");
  if (!in.fingerprint.empty() && in.fingerprint != options_.fingerprint) {
    return Status::InvalidArgument(where + ": record is of another model fingerprint");
  }
  const bool types_ok = !in.kv_types.empty() && IsHeaderText(in.kv_types);
  if (!types_ok || (!options_.kv_types.empty() && in.kv_types != options_.kv_types)) {
    return Status::InvalidArgument(where + ": bad or mismatching kv types \"" + in.kv_types.substr(0, 64) + "\"");
  }
  AGENTKV_RETURN_IF_ERROR(CheckRecord(in, /*check_blocks=*/false).WithContext(where));

  AgentRecord rec = in;
  rec.ns = std::string(ns_name);
  rec.fingerprint = options_.fingerprint;
  rec.blocks.clear();
  const std::vector<std::string> ids = ComputeBlockIds(rec.fingerprint, rec.tokens);

  // A full disk: make room by evicting the least recently used other agent
  // (as the disk budget would) and try again, until the save fits or no
  // other agent is left. The failed attempt's files went with its repair
  // (RepairFailedSaveLocked), so each retry starts from the space it freed.
  uint32_t evicted_for_space = 0;
  for (;;) {
    auto res = SaveAgentOnce(rec, ids, provider);
    if (res.ok()) {
      res->agents_evicted += evicted_for_space;
      return res;
    }
    if (!IsNoSpace(res.status())) return res;
    MutexLock l(&mu_);
    ++stats_.saves_out_of_space;
    auto evicted = EvictForSpaceLocked(rec.ns, rec.agent_id);
    if (!evicted.ok()) {
      AKV_LOG_WARN("store: %s", evicted.status().ToString().c_str());
      return res;
    }
    if (!*evicted) return res;  // nothing else to evict: the agent alone does not fit
    ++evicted_for_space;
  }
}

Result<SaveResult> AgentStore::SaveAgentOnce(AgentRecord rec, const std::vector<std::string>& ids,
                                             const BlockProvider& provider) {
  const std::string where = "save agent " + rec.agent_id;
  const std::string ns_name = rec.ns;
  // One save (or delete) at a time; loads and listings go on while it writes
  // (see below).
  MutexLock save_lock(&save_mu_);
  MutexLock l(&mu_);
  // What an earlier failed attempt or eviction queued goes before this save
  // writes a block file (removals_).
  RemovePendingFiles(l);
  NamespaceState* ns = index_.Find(ns_name);
  if (ns == nullptr) ns = &index_.FindOrAdd(rec.ns, root_ + "/" + NameHash(rec.ns));
  AGENTKV_RETURN_IF_ERROR(CleanIfDirtyLocked(ns).WithContext(where));
  // Checked once: saves are serialized (save_mu_), no other process writes
  // (the cache dir's lock), and nothing else raises a version.
  AGENTKV_RETURN_IF_ERROR(CheckNotStaleLocked(ns, &rec).WithContext(where));
  // From here on, a failure repairs what this save left (or, if it cannot,
  // leaves the namespace to be rescanned from disk).
  auto fail = [&](const Status& st) REQUIRES(mu_, save_mu_) {
    RepairFailedSaveLocked(ns, rec.agent_id, ids);
    RemovePendingFiles(l);
    return st.WithContext(where);
  };
  // All of this save's file I/O runs without the lock (LevelDB's rule), so
  // loads, listings and /metrics never wait behind a write or an fsync: the
  // saves themselves are serialized (save_mu_, held throughout, and
  // DeleteAgent takes it too), block files and the manifest's temp file are
  // unnamed until the rename (`writes_in_flight` keeps a rescan from
  // removing them), and a reader that reads a manifest meanwhile checks it
  // against the index (manifest_changes_, raised before and after).
  ++ns->writes_in_flight;
  auto done = [&](Status st) REQUIRES(mu_, save_mu_) -> Result<SaveResult> {
    --ns->writes_in_flight;
    if (!st.ok()) return fail(st);
    return SaveResult{};
  };
  if (!ns->dirs_ready) {
    const std::string agents_dir = AgentsDir(*ns), blocks_dir = BlocksDir(*ns), ns_dir = ns->dir;
    l.Unlock();
    Status st = CreateDirsDurably(fs_, agents_dir, root_);
    if (st.ok()) st = CreateDirsDurably(fs_, blocks_dir, ns_dir);
    l.Lock();
    if (!st.ok()) return done(st);
    ns->dirs_ready = true;
  }
  const int64_t now = NowMs();
  auto old = ns->agents.find(rec.agent_id);
  rec.created_ms = old != ns->agents.end() ? old->second.created_ms : now;
  rec.updated_ms = now;

  SaveResult res;
  // A written file joins the namespace's blocks (not yet durable).
  auto add_written = [&](const WrittenBlock& w) REQUIRES(mu_) {
    ++res.blocks_written;
    res.bytes_written += w.file_bytes;
    ++stats_.blocks_written;
    stats_.block_bytes_written += w.file_bytes;
    ns->blocks.insert_or_assign(w.id, BlockState{w.file_bytes, w.checksum, 0, false});
  };
  // The block files the namespace lacks (content-addressed: one present is
  // this block); twice at most: a block present at the first look may be
  // gone at the second (quarantined by a read meanwhile).
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<uint32_t> to_write;
    for (uint32_t i = 0; i < ids.size(); ++i) {
      if (!ns->blocks.count(ids[i])) to_write.push_back(i);
    }
    if (to_write.empty()) break;
    std::vector<WrittenBlock> written;
    const NamespaceState& ns_files = *ns;  // dir and name: immutable
    Status st;
    l.Unlock();
    for (uint32_t i : to_write) {
      auto w = WriteBlockFile(ns_files, rec, ids, i, provider);
      if (!w.ok()) {
        st = w.status();
        break;
      }
      written.push_back(*w);
    }
    l.Lock();
    for (const WrittenBlock& w : written) add_written(w);
    if (!st.ok()) return done(st);
  }
  bool sync_blocks = false;
  for (uint32_t i = 0; i < ids.size(); ++i) {
    auto have = ns->blocks.find(ids[i]);
    if (have == ns->blocks.end()) {
      return done(Status::Unavailable(where + ": block " + ids[i] + " removed again while it was written"));
    }
    sync_blocks |= !have->second.durable;
    rec.blocks.push_back({ids[i], BlockTokensAt(rec, i), have->second.checksum, have->second.file_bytes});
  }
  auto manifest = EncodeManifest(rec);
  if (!manifest.ok()) return done(manifest.status());
  // Every block the manifest names durable before the manifest is; then the
  // manifest (temp, fsync, rename, fsync of agents/).
  ++manifest_changes_;  // before the rename: a manifest read without the lock meanwhile is not trusted blindly
  const std::string blocks_dir = BlocksDir(*ns), manifest_path = ManifestPath(*ns, rec.agent_id);
  l.Unlock();
  Status st = sync_blocks ? fs_->SyncDir(blocks_dir) : Status::OK();
  const bool blocks_synced = sync_blocks && st.ok();
  if (st.ok()) st = WriteFileAtomically(fs_, manifest_path, *manifest, /*sync_dir=*/true);
  l.Lock();
  ++manifest_changes_;  // and after it: a read that began meanwhile is checked too
  // Only saves write blocks (one at a time): the fsync covered every block on disk.
  if (blocks_synced) {
    for (auto& [id, b] : ns->blocks) b.durable = true;
  }
  if (Result<SaveResult> r = done(st); !r.ok()) return r;
  ++stats_.manifests_written;
  res.bytes_written += manifest->size();

  // Committed. agents/ was just fsynced, so every manifest of this namespace
  // is durable as seen, and blocks none of them names can go.
  AgentState& a = ns->agents[rec.agent_id];
  a = StateOfManifest(rec, manifest->size());
  a.last_used_ms = now;
  a.usable = true;
  StoreIndex::RecountRefs(ns);
  CollectGarbageLocked(ns);
  st = EnforceBudgetLocked(ns, rec.agent_id, &res.agents_evicted);
  if (!st.ok()) AKV_LOG_WARN("store: %s", st.ToString().c_str());  // the save itself succeeded
  res.blocks_deleted = RemovePendingFiles(l);
  res.record = std::move(rec);
  return res;
}

Status AgentStore::DeleteAgent(std::string_view ns_name, std::string_view agent_id) {
  AGENTKV_RETURN_IF_ERROR(ValidateIds(ns_name, agent_id).WithContext("delete agent"));
  if (options_.read_only) return Status::FailedPrecondition("delete agent: store is read-only");
  MutexLock save_lock(&save_mu_);  // never inside a save's unlocked writes (its agent could come back)
  MutexLock l(&mu_);
  AGENTKV_ASSIGN_OR_RETURN(NamespaceState * ns, PrepareLocked(ns_name));
  if (ns == nullptr) return Status::NotFound("delete agent " + std::string(agent_id) + ": not found");
  Status st = DeleteAgentLocked(ns, std::string(agent_id));
  Status erased;
  RemovePendingFiles(l, &erased);
  return st.ok() ? erased.WithContext("delete agent " + std::string(agent_id)) : st;
}

StoreStats AgentStore::stats() {
  MutexLock l(&mu_);
  StoreStats s = stats_;
  const StoreIndex::Totals t = index_.totals();
  s.agents = t.agents;
  s.block_files = t.block_files;
  s.disk_bytes = t.disk_bytes;
  return s;
}

}  // namespace agentkv
