#include "store/block_files_reader.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <sys/resource.h>

#include "util/log.h"
#include "util/parallel.h"

namespace agentkv {
namespace {

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Reads in flight during a load: enough parallel requests to keep a virtual
// or NVMe disk's queue busy (one file per 256-token block, 0.3-10 MB each,
// split into reads of BlockReadChunkBytes so that a few files are enough
// reads too). Measured on the H200 host's disk (16 cores;
// bench/HISTORY.md, issue #8): cold reads of 137 9.4 MB files reach 1.9, 2.0,
// 2.2 GB/s with 8, 16, 32 threads; the threads mostly wait on the disk, so
// twice the cores, at least 8.
int DefaultReadThreads() {
  static const int n = std::clamp(2 * static_cast<int>(std::thread::hardware_concurrency()), 8, 32);
  return n;
}

// What the whole process used so far (every thread), for a load's debug line.
struct ProcessUsage {
  long minor_faults = 0;
  double user_ms = 0, sys_ms = 0;
  static ProcessUsage Now() {
    rusage r{};
    ::getrusage(RUSAGE_SELF, &r);
    const auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
    return {r.ru_minflt, ms(r.ru_utime), ms(r.ru_stime)};
  }
};

}  // namespace

int BlockFilesReader::Threads() const { return read_threads_ > 0 ? read_threads_ : DefaultReadThreads(); }

BlockReadOptions BlockFilesReader::OptionsFor(const std::vector<uint64_t>& file_bytes, bool streaming) const {
  const int threads = Threads();
  uint64_t bytes = 0;
  for (uint64_t b : file_bytes) bytes += b;
  BlockReadOptions options;
  options.reserve = reserve_;
  options.offset_major = streaming;
  options.chunk_bytes = read_chunk_bytes_.value_or(streaming ? StreamReadChunkBytes(bytes, threads)
                                                             : BlockReadChunkBytes(bytes, threads));
  uint64_t reads = 0;
  for (uint64_t b : file_bytes) reads += 1 + (options.chunk_bytes > 0 ? b / options.chunk_bytes : 0);
  options.n_threads = static_cast<int>(std::min<uint64_t>(threads, reads));
  return options;
}

std::vector<Result<DecodedBlock>> BlockFilesReader::Read(const std::vector<std::string>& paths,
                                                         const std::vector<uint64_t>& file_bytes) const {
  return ReadBlockFiles(fs_, paths, OptionsFor(file_bytes));
}

void BlockFilesReader::StartThreads(const std::function<void(size_t reader, size_t n_readers)>& on_each_reader) const {
  if (!concurrent()) {  // files are read on their caller's thread
    if (on_each_reader) on_each_reader(0, 1);
    return;
  }
  const int threads = Threads();
  // An Ahead's job runs on a worker of this thread's team, its readers on
  // that worker's team: start both.
  const std::function<void(size_t)> start_readers = [threads, &on_each_reader](size_t) {
    ParallelFor(static_cast<size_t>(threads), threads, [&](size_t i) {
      if (on_each_reader) on_each_reader(i, static_cast<size_t>(threads));
    });
  };
  WorkerTeam& team = WorkerTeam::ForThisThread();
  team.Launch(1, &start_readers);
  team.Wait();
}

std::unique_ptr<BlockFilesReader::Ahead> BlockFilesReader::StartAhead(
    std::vector<std::string> paths, const std::vector<uint64_t>& file_bytes, bool streaming,
    std::function<void(size_t file, const DecodedBlock& block)> on_file_read,
    decltype(BlockReadOptions::on_data_read) on_data_read) const {
  std::unique_ptr<Ahead> a(new Ahead());
  Ahead* self = a.get();
  for (uint64_t b : file_bytes) a->bytes_ += b;
  a->options_ = OptionsFor(file_bytes, streaming);
  a->options_.on_data_read = std::move(on_data_read);
  a->paths_ = std::move(paths);
  a->job_ = [this, self, on_file_read = std::move(on_file_read)](size_t) {
    const Clock::time_point start = Clock::now();
    BlockReadOptions options = self->options_;
    options.on_file_read = [&](size_t k, const DecodedBlock& dec) {
      if (on_file_read) on_file_read(k, dec);
      const double at = MsSince(start);
      double none = -1;
      self->first_file_ms_.compare_exchange_strong(none, at);
      for (double last = self->last_file_ms_.load(); at > last && !self->last_file_ms_.compare_exchange_weak(last, at);) {
      }
    };
    // Two getrusage calls per read, only for the debug line.
    const bool debug = LogEnabled(LogLevel::kDebug);
    const ProcessUsage before = debug ? ProcessUsage::Now() : ProcessUsage{};
    self->read_ = ReadBlockFiles(fs_, self->paths_, options);
    if (debug) {
      const ProcessUsage after = ProcessUsage::Now();
      self->minor_faults_ = after.minor_faults - before.minor_faults;
      self->user_ms_ = after.user_ms - before.user_ms;
      self->sys_ms_ = after.sys_ms - before.sys_ms;
    }
    self->reader_ms_ = MsSince(start);
  };
  WorkerTeam::ForThisThread().Launch(1, &a->job_);
  return a;
}

BlockFilesReader::Ahead::~Ahead() {
  if (!waited_) Wait();
}

std::vector<Result<DecodedBlock>> BlockFilesReader::Ahead::Wait() {
  if (!waited_) {
    WorkerTeam::ForThisThread().Wait();
    waited_ = true;
  }
  return std::move(read_);
}

}  // namespace agentkv
