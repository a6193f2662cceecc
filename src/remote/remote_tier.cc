#include "remote/remote_tier.h"

#include "store/block_belongs.h"
#include "store/block_file.h"
#include "store/manifest.h"
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv {
namespace {

// Blocks uploaded per pipelined batch: bounds the bytes one Push holds encoded.
constexpr size_t kPutBatch = 8;

bool IsBackendFailure(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kIOError;
}

}  // namespace

Result<DecodedBlock> VerifyRemoteBlock(const std::optional<std::string>& bytes, const AgentRecord& rec, uint32_t i,
                                       std::string_view fingerprint) {
  if (!bytes) return Status::NotFound("missing");
  auto dec = DecodeBlockFile(*bytes);
  if (!dec.ok()) return dec.status();
  AGENTKV_RETURN_IF_ERROR(CheckBlockBelongs(*dec, rec, i, fingerprint));
  if (dec->meta.checksum != rec.blocks[i].checksum) {
    return Status::Corruption("block file: checksum differs from the manifest's");
  }
  return dec;
}

RemoteTier::RemoteTier(RemoteStore* store, std::string fingerprint, std::string kv_types, bool repair)
    : store_(store), fingerprint_(std::move(fingerprint)), kv_types_(std::move(kv_types)), repair_(repair) {}

Status RemoteTier::CountError(Status s) {
  if (IsBackendFailure(s)) ++counters_.errors;
  return s;
}

Result<LoadedAgent> RemoteTier::Fetch(std::string_view ns, std::string_view agent_id, uint64_t newer_than) {
  AGENTKV_ASSIGN_OR_RETURN(AgentRecord rec, FetchManifest(ns, agent_id, newer_than));
  AGENTKV_ASSIGN_OR_RETURN(RemoteFetch got, FetchBlocks(rec));
  return std::move(got.loaded);
}

Result<AgentRecord> RemoteTier::FetchManifest(std::string_view ns, std::string_view agent_id, uint64_t newer_than) {
  AGENTKV_RETURN_IF_ERROR(ValidateName("namespace", ns));
  AGENTKV_RETURN_IF_ERROR(ValidateName("agent id", agent_id));
  const RemoteScope scope = Scope(ns);
  auto got = store_->GetManifest(scope, agent_id);
  if (!got.ok()) return CountError(got.status());
  if (!got->has_value()) {
    ++counters_.misses;
    return Status::NotFound("remote: no manifest for agent " + std::string(agent_id));
  }
  if (newer_than > 0 && (*got)->version <= newer_than) {
    return Status::AlreadyExists("remote: agent " + std::string(agent_id) + " is not newer there");
  }
  counters_.bytes_read += (*got)->bytes.size();
  auto rec = DecodeManifest((*got)->bytes);
  Status bad;
  if (!rec.ok()) {
    bad = rec.status();
  } else if (rec->ns != ns || rec->agent_id != agent_id) {
    bad = Status::Corruption("remote manifest: names another agent");
  } else if (rec->fingerprint != fingerprint_) {
    bad = Status::Corruption("remote manifest: model fingerprint " + rec->fingerprint + " differs");
  } else if (rec->version != (*got)->version) {
    bad = Status::Corruption("remote manifest: version differs from its entry's");
  }
  if (!bad.ok()) {
    ++counters_.corrupt_manifests;
    AKV_LOG_WARN("remote: agent %s: %s", std::string(agent_id).c_str(), bad.ToString().c_str());
    return bad;
  }
  if (!kv_types_.empty() && rec->kv_types != kv_types_) {
    ++counters_.misses;
    return Status::NotFound("remote: agent " + std::string(agent_id) + " was saved with kv types " + rec->kv_types);
  }
  ++counters_.hits;
  return std::move(rec).value();
}

Result<RemoteFetch> RemoteTier::FetchBlocks(const AgentRecord& rec, std::vector<std::optional<KvBlock>> held) {
  const RemoteScope scope = Scope(rec.ns);
  held.resize(rec.blocks.size());
  std::vector<std::string> ids;  // the ones to fetch, in order
  for (size_t i = 0; i < rec.blocks.size(); ++i) {
    if (!held[i]) ids.push_back(rec.blocks[i].id);
  }
  std::vector<std::optional<std::string>> fetched;
  if (!ids.empty()) {
    auto blocks = store_->GetBlocks(scope, ids);
    if (!blocks.ok()) {
      // The manifest came, the blocks did not: serve nothing rather than guess.
      return CountError(blocks.status());
    }
    fetched = std::move(blocks).value();
  }
  RemoteFetch out;
  LoadedAgent& loaded = out.loaded;
  size_t next_fetched = 0;
  uint32_t i = 0;
  for (; i < rec.blocks.size(); ++i) {
    if (held[i]) {
      ++counters_.local_blocks;
      loaded.valid_tokens += held[i]->n_tokens;
      loaded.blocks.push_back(std::move(*held[i]));
      continue;
    }
    const std::string& id = rec.blocks[i].id;
    const std::optional<std::string>& bytes = fetched[next_fetched++];
    const std::string where = "remote block " + std::to_string(i) + " (" + id + ")";
    if (bytes) counters_.bytes_read += bytes->size();
    auto dec = VerifyRemoteBlock(bytes, rec, i, fingerprint_);
    if (!dec.ok() && dec.status().code() == StatusCode::kNotFound) {
      ++counters_.missing_blocks;
      loaded.stop_reason = dec.status().WithContext(where);
      break;
    }
    if (!dec.ok()) {
      const Status& st = dec.status();
      ++counters_.corrupt_blocks;
      // Dropped, so that the next push of any agent naming it uploads it anew
      // (blocks are written only if absent). Best effort.
      if (repair_) (void)CountError(store_->DeleteBlocks(scope, std::span<const std::string>(&id, 1)));
      AKV_LOG_WARN("remote: agent %s: %s: %s", rec.agent_id.c_str(), where.c_str(), st.ToString().c_str());
      loaded.stop_reason = st.WithContext(where);
      break;
    }
    ++out.remote_blocks;
    loaded.valid_tokens += dec->block.n_tokens;
    loaded.blocks.push_back(std::move(dec->block));
  }
  loaded.complete = i == rec.blocks.size();
  loaded.record = rec;
  return out;
}

Status RemoteTier::Push(const AgentRecord& saved, const std::vector<const KvBlock*>& blocks) {
  if (blocks.size() != saved.blocks.size()) return Status::Internal("remote push: block count differs from the record's");
  const RemoteScope scope = Scope(saved.ns);
  std::vector<std::string> ids;
  for (const auto& b : saved.blocks) ids.push_back(b.id);
  // Claimed before the existence check: a block another agent's release
  // would drop meanwhile is then kept (or found absent and uploaded).
  AGENTKV_RETURN_IF_ERROR(CountError(store_->ClaimBlocks(scope, saved.agent_id, ids)));
  auto exist = store_->BlocksExist(scope, ids);
  if (!exist.ok()) return CountError(exist.status());
  std::vector<std::string> encoded;
  std::vector<std::pair<std::string, std::string_view>> batch;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::OK();
    auto n = store_->PutBlocksIfAbsent(scope, batch);
    if (!n.ok()) return CountError(n.status());
    counters_.blocks_written += *n;
    for (const auto& [id, bytes] : batch) counters_.bytes_written += bytes.size();
    batch.clear();
    encoded.clear();
    return Status::OK();
  };
  encoded.reserve(kPutBatch);
  for (size_t i = 0; i < ids.size(); ++i) {
    if ((*exist)[i]) continue;
    BlockMeta meta{ids[i], i == 0 ? "" : ids[i - 1], saved.fingerprint, saved.kv_types, 0};
    auto file = EncodeBlockFile(*blocks[i], meta);
    if (!file.ok()) return file.status().WithContext("remote push");
    encoded.push_back(std::move(file).value());
    batch.emplace_back(ids[i], encoded.back());
    if (batch.size() == kPutBatch) AGENTKV_RETURN_IF_ERROR(flush());
  }
  AGENTKV_RETURN_IF_ERROR(flush());
  auto manifest = EncodeManifest(saved);
  if (!manifest.ok()) return manifest.status().WithContext("remote push");
  auto put = store_->PutManifestIfNewer(scope, saved.agent_id, saved.version, *manifest);
  if (!put.ok()) return CountError(put.status());
  if (!*put) {
    ++counters_.stale_manifests;  // the newer version's push releases what it supersedes
    return Status::OK();
  }
  ++counters_.manifests_written;
  counters_.bytes_written += manifest->size();
  // The blocks of earlier turns this one no longer names (and no other agent
  // claims) go now, or every turn would orphan one more for ever.
  auto released = store_->ReleaseBlocks(scope, saved.agent_id, ids, saved.version);
  if (!released.ok()) return CountError(released.status());
  counters_.blocks_deleted += *released;
  return Status::OK();
}

Status RemoteTier::Delete(std::string_view ns, std::string_view agent_id) {
  const RemoteScope scope = Scope(ns);
  auto got = store_->GetManifest(scope, agent_id);
  if (!got.ok()) return CountError(got.status());
  if (got->has_value()) {
    // The current manifest's blocks join the agent's claims (blocks pushed
    // before claims existed had none), so the release below covers them too.
    auto rec = DecodeManifest((*got)->bytes);
    if (rec.ok() && rec->ns == ns && rec->agent_id == agent_id) {
      std::vector<std::string> ids;
      for (const auto& b : rec->blocks) ids.push_back(b.id);
      AGENTKV_RETURN_IF_ERROR(CountError(store_->ClaimBlocks(scope, agent_id, ids)));
    }
  }
  AGENTKV_RETURN_IF_ERROR(CountError(store_->DeleteManifest(scope, agent_id)));
  // Every block the agent ever pushed that no other agent claims.
  auto released = store_->ReleaseBlocks(scope, agent_id, {}, /*if_version=*/0);
  if (!released.ok()) return CountError(released.status());
  counters_.blocks_deleted += *released;
  return Status::OK();
}

std::string RemoteTier::RenderMetrics() const {
  std::string out;
  auto counter = [&](const char* name, const char* help, const std::atomic<uint64_t>& v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
           std::to_string(v.load()) + "\n";
  };
  const RemoteTierCounters& c = counters_;
  counter("agentkv_remote_hits_total", "Remote fetches that found the agent's manifest.", c.hits);
  counter("agentkv_remote_misses_total", "Remote fetches that found no usable manifest.", c.misses);
  counter("agentkv_remote_errors_total", "Remote calls that failed (outage, timeout, error reply).", c.errors);
  counter("agentkv_remote_corrupt_blocks_total", "Remote blocks that failed verification (never imported).",
          c.corrupt_blocks);
  counter("agentkv_remote_corrupt_manifests_total", "Remote manifests that failed verification.", c.corrupt_manifests);
  counter("agentkv_remote_missing_blocks_total", "Blocks a remote manifest named that were absent (evicted).",
          c.missing_blocks);
  counter("agentkv_remote_read_bytes_total", "Bytes fetched from the remote tier.", c.bytes_read);
  counter("agentkv_remote_written_bytes_total", "Bytes written to the remote tier.", c.bytes_written);
  counter("agentkv_remote_blocks_written_total", "Blocks written to the remote tier (absent before).",
          c.blocks_written);
  counter("agentkv_remote_blocks_deleted_total",
          "Blocks deleted from the remote tier: no agent names them any more (superseded turns, deleted agents).",
          c.blocks_deleted);
  counter("agentkv_remote_manifests_written_total", "Manifests written to the remote tier.", c.manifests_written);
  counter("agentkv_remote_local_blocks_total",
          "Blocks of a newer remote manifest read from the local disk instead of fetched.", c.local_blocks);
  counter("agentkv_remote_stale_manifests_total", "Manifest writes refused because the remote held a newer version.",
          c.stale_manifests);
  return out;
}

}  // namespace agentkv
