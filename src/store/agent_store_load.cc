// AgentStore's load path: LoadBlocks reads an agent's manifest, and its block
// files through the reader (store/block_files_reader.h), without the store's
// lock, and checks them under it (see agent_store.h).

#include "store/agent_store.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "store/block_read.h"
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv {

Result<LoadedAgent> AgentStore::LoadBlocks(std::string_view ns_name, std::string_view agent_id,
                                           uint32_t first_block, LoadObserver* observer) {
  AGENTKV_RETURN_IF_ERROR(ValidateIds(ns_name, agent_id));
  using Clock = std::chrono::steady_clock;
  const auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  const Clock::time_point start = Clock::now();
  const std::string id(agent_id);
  // The lock is held only to look up and, at the end, to check and account
  // (LevelDB's rule): the manifest and the block files are read without it,
  // so that /metrics, admin calls and other loads never wait for this disk
  // read. ns stays valid (namespaces are never erased after Open) and ns->dir
  // is immutable; files are immutable (blocks) or replaced by rename
  // (manifests), so an unlocked read sees a whole old or new file, or none.
  NamespaceState* ns = nullptr;
  std::vector<BlockRef> indexed;
  uint64_t stamp = 0;
  double lock_ms = 0;
  {
    MutexLock l(&mu_);
    lock_ms = ms_since(start);
    AGENTKV_ASSIGN_OR_RETURN(ns, PrepareLocked(ns_name));
    if (ns == nullptr) return Status::NotFound("agent " + id + ": not found");
    AGENTKV_RETURN_IF_ERROR(CheckReadableLocked(*ns, id));
    indexed = ns->agents.find(id)->second.blocks;
    stamp = manifest_changes_;
  }
  // The block files are read (and decoded and checksummed) on ReadThreads()
  // threads (ReadBlockFiles) while this thread reads the manifest: their ids
  // come from the index, which names the same blocks as the manifest unless
  // the file changed meanwhile (then the blocks that differ are read after
  // it, in order). The checks against the manifest and the bookkeeping are
  // done under the lock once everything is read.
  const uint32_t first = std::min<uint32_t>(first_block, static_cast<uint32_t>(indexed.size()));
  std::vector<std::optional<Result<DecodedBlock>>> ahead(indexed.size());
  // The block files are read by a worker of this thread's WorkerTeam (kept
  // between loads, as are that worker's own readers: util/parallel.h).
  std::unique_ptr<BlockFilesReader::Ahead> ahead_read;
  if (reader_.concurrent() && first < indexed.size()) {
    std::vector<std::string> paths;
    std::vector<uint64_t> file_bytes;
    for (uint32_t b = first; b < indexed.size(); ++b) {
      paths.push_back(BlockPath(*ns, indexed[b].id));
      file_bytes.push_back(indexed[b].file_bytes);
    }
    if (observer != nullptr) observer->OnPlan(first, std::span<const BlockRef>(indexed).subspan(first));
    const bool streaming = observer != nullptr && observer->Streams();
    decltype(BlockReadOptions::on_data_read) on_data_read;
    if (streaming) {
      on_data_read = [observer, first](size_t k, const BlockFileLayout& layout, uint64_t begin, uint64_t end) {
        observer->OnDataRead(first + static_cast<uint32_t>(k), layout, begin, end);
      };
    }
    std::function<void(size_t, const DecodedBlock&)> on_file_read;
    if (observer != nullptr) {
      on_file_read = [observer, first](size_t k, const DecodedBlock& dec) {
        observer->OnBlockRead(first + static_cast<uint32_t>(k), dec.block);
      };
    }
    ahead_read = reader_.StartAhead(std::move(paths), file_bytes, streaming, std::move(on_file_read),
                                    std::move(on_data_read));
  }
  const Clock::time_point manifest_start = Clock::now();
  Result<std::string> manifest = fs_->ReadFile(ManifestPath(*ns, id));
  Result<AgentRecord> rec_or = [&] {
    MutexLock l(&mu_);
    return DecodeRecordLocked(ns, id, std::move(manifest), stamp);
  }();
  const double manifest_ms = ms_since(manifest_start);
  if (observer != nullptr && rec_or.ok()) observer->OnRecord(*rec_or);
  if (ahead_read != nullptr) {
    std::vector<Result<DecodedBlock>> read = ahead_read->Wait();
    for (size_t k = 0; k < read.size(); ++k) ahead[first + k] = std::move(read[k]);
  }
  AGENTKV_RETURN_IF_ERROR(rec_or.status());
  AgentRecord rec = std::move(rec_or).value();
  // Per block of the manifest from first_block on: its file as read ahead, or
  // (not read ahead: a file system that reads one file at a time, or the
  // index named another block) read now, in order, up to the first that
  // fails (the checks stop there).
  const uint32_t from = std::min<uint32_t>(first_block, static_cast<uint32_t>(rec.blocks.size()));
  std::vector<std::optional<Result<DecodedBlock>>> got(rec.blocks.size());
  for (uint32_t b = from; b < rec.blocks.size(); ++b) {
    if (b < ahead.size() && ahead[b] && indexed[b] == rec.blocks[b]) {
      got[b] = std::move(ahead[b]);
    } else {
      got[b] = ReadBlockFile(fs_, BlockPath(*ns, rec.blocks[b].id));
    }
    if (!got[b]->ok()) break;
  }
  const Clock::time_point checks_start = Clock::now();
  MutexLock l(&mu_);
  // A save or erasure ran while the files were read (agent_store.h):
  // erased, the read's result is dropped; saved again, blocks its garbage
  // collection took are where the result stops, not faults of the cache.
  const bool changed = stamp != manifest_changes_;
  auto it = ns->agents.find(id);
  if (changed && it == ns->agents.end()) return Status::NotFound("agent " + id + ": erased while it was read");
  LoadedAgent out;
  uint32_t i = from;
  for (uint32_t j = 0; j < i; ++j) out.valid_tokens += rec.blocks[j].n_tokens;
  for (; i < rec.blocks.size() && got[i]; ++i) {
    const StatusCode read_code = got[i]->ok() ? StatusCode::kOk : got[i]->status().code();
    const bool gone_or_replaced = read_code == StatusCode::kNotFound || read_code == StatusCode::kCorruption;
    if (changed && (gone_or_replaced || !ns->blocks.count(rec.blocks[i].id))) {  // an I/O error stays one
      const std::string why = got[i]->ok() ? "collected" : got[i]->status().ToString();
      out.stop_reason = Status::Unavailable("block " + std::to_string(i) + " (" + rec.blocks[i].id +
                                            "): changed by a save or erasure while it was read: " + why);
      break;
    }
    auto block = ReadBlockLocked(ns, rec, i, std::move(got[i]));
    if (!block.ok()) {
      out.stop_reason = block.status();
      break;
    }
    out.valid_tokens += block->n_tokens;
    out.blocks.push_back(std::move(block).value());
  }
  out.complete = i == rec.blocks.size();
  if (it != ns->agents.end()) it->second.last_used_ms = std::max(it->second.last_used_ms, NowMs());
  out.record = std::move(rec);
  // Where a load's time went (AGENTKV_LOG=debug): the in-server read of a
  // fresh process against `bench store`'s (bench/HISTORY.md, stop 11).
  if (ahead_read != nullptr) {
    const BlockFilesReader::Ahead& r = *ahead_read;
    AKV_LOG_DEBUG("store: loaded %s/%s: %zu blocks (%.1f MB of block files, %d readers, %.2f MB reads) in %.2f ms: "
                  "lock %.2f, manifest %.2f (beside the block files), block files %.2f (files done from %.2f to %.2f; "
                  "process meanwhile: %ld minor faults, user %.1f ms, sys %.1f ms), checks %.2f",
                  std::string(ns_name).c_str(), id.c_str(), out.blocks.size(), r.bytes() / 1e6,
                  r.options().n_threads, r.options().chunk_bytes / 1e6, ms_since(start), lock_ms, manifest_ms,
                  r.reader_ms(), r.first_file_ms(), r.last_file_ms(), r.minor_faults(), r.user_ms(), r.sys_ms(),
                  ms_since(checks_start));
  }
  return out;
}

void AgentStore::StartReadThreads(const std::function<void(size_t reader, size_t n_readers)>& on_each_reader) {
  reader_.StartThreads(on_each_reader);
}

}  // namespace agentkv
