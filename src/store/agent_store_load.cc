// AgentStore's load path: LoadBlocks reads an agent's manifest and block files
// without the store's lock (on StartReadThreads' readers) and checks them
// under it (see agent_store.h).

#include "store/agent_store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <sys/resource.h>

#include "store/block_read.h"
#include "store/store_ids.h"
#include "util/log.h"
#include "util/parallel.h"

namespace agentkv {
namespace {

// Reads in flight during a load: enough parallel requests to keep a virtual
// or NVMe disk's queue busy (one file per 256-token block, 0.3-10 MB each,
// split into reads of BlockReadChunkBytes so that a few files are enough
// reads too). Measured on the H200 host's disk (16 cores;
// bench/HISTORY.md, issue #8): cold reads of 137 9.4 MB files reach 1.9, 2.0,
// 2.2 GB/s with 8, 16, 32 threads; the threads mostly wait on the disk, so
// twice the cores, at least 8.
int ReadThreads() {
  static const int n = std::clamp(2 * static_cast<int>(std::thread::hardware_concurrency()), 8, 32);
  return n;
}

// What the whole process used meanwhile (every thread: the readers' page
// faults and system time show here), for a load's debug line.
struct ProcessUsage {
  long minor_faults = 0;
  double user_ms = 0, sys_ms = 0;
  static ProcessUsage Now() {
    rusage r{};
    ::getrusage(RUSAGE_SELF, &r);
    const auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
    return {r.ru_minflt, ms(r.ru_utime), ms(r.ru_stime)};
  }
  ProcessUsage Since(const ProcessUsage& before) const {
    return {minor_faults - before.minor_faults, user_ms - before.user_ms, sys_ms - before.sys_ms};
  }
};

}  // namespace

BlockReadOptions AgentStore::ReadOptionsFor(const std::vector<uint64_t>& file_bytes, bool streaming) const {
  const int threads = options_.read_threads > 0 ? options_.read_threads : ReadThreads();
  uint64_t bytes = 0;
  for (uint64_t b : file_bytes) bytes += b;
  BlockReadOptions read_options;
  read_options.reserve = read_reserve_;
  read_options.offset_major = streaming;
  read_options.chunk_bytes = options_.read_chunk_bytes.value_or(
      streaming ? StreamReadChunkBytes(bytes, threads) : BlockReadChunkBytes(bytes, threads));
  uint64_t reads = 0;
  for (uint64_t b : file_bytes) reads += 1 + (read_options.chunk_bytes > 0 ? b / read_options.chunk_bytes : 0);
  read_options.n_threads = static_cast<int>(std::min<uint64_t>(threads, reads));
  return read_options;
}

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
  std::function<void(size_t)> read_job;
  BlockReadOptions read_options;
  uint64_t read_bytes = 0;
  double reader_ms = 0;  // the block files' read, on the reader thread
  // When the first and the last file finished (ms into the read): how much
  // of the read a restore in pieces could overlap (debug line).
  std::atomic<double> first_file_ms{-1}, last_file_ms{0};
  ProcessUsage usage;
  if (fs_->ConcurrentReads() && first < indexed.size()) {
    std::vector<std::string> paths;
    for (uint32_t b = first; b < indexed.size(); ++b) paths.push_back(BlockPath(*ns, indexed[b].id));
    // Every file's head and data chunks from one queue, so that even an agent
    // of a few large blocks keeps n_threads reads in flight; no more threads
    // than reads (a short agent of small files needs few).
    std::vector<uint64_t> file_bytes;
    for (uint32_t b = first; b < indexed.size(); ++b) file_bytes.push_back(indexed[b].file_bytes);
    for (uint64_t b : file_bytes) read_bytes += b;
    if (observer != nullptr) observer->OnPlan(first, std::span<const BlockRef>(indexed).subspan(first));
    const bool streaming = observer != nullptr && observer->Streams();
    read_options = ReadOptionsFor(file_bytes, streaming);
    if (streaming) {
      read_options.on_data_read = [observer, first](size_t k, const BlockFileLayout& layout, uint64_t begin,
                                                    uint64_t end) {
        observer->OnDataRead(first + static_cast<uint32_t>(k), layout, begin, end);
      };
    }
    read_job = [this, &ahead, &reader_ms, &ms_since, &first_file_ms, &last_file_ms, &usage, observer, first, read_options,
                paths = std::move(paths)](size_t) mutable {
      const Clock::time_point reader_start = Clock::now();
      read_options.on_file_read = [&](size_t k, const DecodedBlock& dec) {
        if (observer != nullptr) observer->OnBlockRead(first + static_cast<uint32_t>(k), dec.block);
        const double at = ms_since(reader_start);
        double none = -1;
        first_file_ms.compare_exchange_strong(none, at);
        for (double last = last_file_ms.load(); at > last && !last_file_ms.compare_exchange_weak(last, at);) {
        }
      };
      // Two getrusage calls per load, only for the debug line.
      const bool debug = LogEnabled(LogLevel::kDebug);
      const ProcessUsage usage_start = debug ? ProcessUsage::Now() : ProcessUsage{};
      std::vector<Result<DecodedBlock>> read = ReadBlockFiles(fs_, paths, read_options);
      if (debug) usage = ProcessUsage::Now().Since(usage_start);
      for (size_t k = 0; k < read.size(); ++k) ahead[first + k] = std::move(read[k]);
      reader_ms = ms_since(reader_start);
    };
    WorkerTeam::ForThisThread().Launch(1, &read_job);
  }
  const Clock::time_point manifest_start = Clock::now();
  Result<std::string> manifest = fs_->ReadFile(ManifestPath(*ns, id));
  Result<AgentRecord> rec_or = [&] {
    MutexLock l(&mu_);
    return DecodeRecordLocked(ns, id, std::move(manifest), stamp);
  }();
  const double manifest_ms = ms_since(manifest_start);
  if (observer != nullptr && rec_or.ok()) observer->OnRecord(*rec_or);
  if (read_job) WorkerTeam::ForThisThread().Wait();
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
  AKV_LOG_DEBUG("store: loaded %s/%s: %zu blocks (%.1f MB of block files, %d readers, %.2f MB reads) in %.2f ms: "
                "lock %.2f, manifest %.2f (beside the block files), block files %.2f (files done from %.2f to %.2f; "
                "process meanwhile: %ld minor faults, user %.1f ms, sys %.1f ms), checks %.2f",
                std::string(ns_name).c_str(), id.c_str(), out.blocks.size(), read_bytes / 1e6, read_options.n_threads,
                read_options.chunk_bytes / 1e6, ms_since(start), lock_ms, manifest_ms, reader_ms, first_file_ms.load(),
                last_file_ms.load(), usage.minor_faults, usage.user_ms, usage.sys_ms, ms_since(checks_start));
  return out;
}

void AgentStore::StartReadThreads(const std::function<void(size_t reader, size_t n_readers)>& on_each_reader) {
  if (!fs_->ConcurrentReads()) {  // LoadBlocks reads on its caller's thread
    if (on_each_reader) on_each_reader(0, 1);
    return;
  }
  const int threads = options_.read_threads > 0 ? options_.read_threads : ReadThreads();
  // LoadBlocks' read job runs on a worker of this thread's team, its readers
  // on that worker's team: start both.
  const std::function<void(size_t)> start_readers = [threads, &on_each_reader](size_t) {
    ParallelFor(static_cast<size_t>(threads), threads, [&](size_t i) {
      if (on_each_reader) on_each_reader(i, static_cast<size_t>(threads));
    });
  };
  WorkerTeam& team = WorkerTeam::ForThisThread();
  team.Launch(1, &start_readers);
  team.Wait();
}

}  // namespace agentkv
