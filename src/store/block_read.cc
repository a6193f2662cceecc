#include "store/block_read.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "util/parallel.h"

namespace agentkv {
namespace {

// One file of a ReadBlockFiles call, from its head read to its checksum.
struct FileRead {
  std::optional<BlockFileLayout> layout;  // once the header checked out
  std::string head;  // the bytes of the head read, until the buffers are sized
  // The data the head read did not cover: the tensors' buffers (or their
  // tails) in file order, empty ones left out, and the file offset of each.
  std::vector<std::span<uint8_t>> rest;
  std::vector<uint64_t> rest_begin;
  uint64_t file_size = 0;
  std::vector<Status> chunk_status;  // one per chunk, each written by its reader
  std::atomic<size_t> chunks_left{0};
  std::atomic<bool> failed{false};       // a chunk failed: skip the others
  std::optional<Result<DecodedBlock>> result;
};

// One read of a data section: chunk `index` of file `file`, bytes [begin, end).
struct Chunk {
  size_t file, index;
  uint64_t begin, end;
};

// Corruption names the file (the file system's own errors already do).
Status Named(const Status& st, const std::string& path) {
  return st.code() == StatusCode::kCorruption ? st.WithContext(path) : st;
}

Status Shrank() { return Status::Corruption("block file: shrank while read"); }

// Up to n bytes of a file at an offset (fewer at its end).
using RangeReader = std::function<Result<std::string>(uint64_t offset, size_t n)>;

// Step 1 of an image's head: reads the head of the image [base, base +
// f->file_size) of the file `read` reads and checks its header (every
// structural check); keeps the bytes read in f->head. The tensors' buffers
// are left unsized (SizeImage), so that another thread can do that.
Status ParseImageHead(const RangeReader& read, uint64_t base, FileRead* f) {
  AGENTKV_ASSIGN_OR_RETURN(f->head,
                           read(base, static_cast<size_t>(std::min<uint64_t>(f->file_size, kBlockHeadReadBytes))));
  AGENTKV_ASSIGN_OR_RETURN(const uint64_t data_offset, BlockDataOffset(f->head, f->file_size));
  if (f->head.size() < data_offset) {  // a header longer than the first read
    AGENTKV_ASSIGN_OR_RETURN(std::string more, read(base + f->head.size(), data_offset - f->head.size()));
    f->head += more;
    if (f->head.size() < data_offset) return Shrank();
  }
  AGENTKV_ASSIGN_OR_RETURN(BlockFileLayout layout,
                           DecodeBlockHeader(std::string_view(f->head).substr(0, data_offset), f->file_size,
                                             [](std::span<KvTensor>) {}));
  f->layout = std::move(layout);
  return Status::OK();
}

// Step 2 (after ParseImageHead): sizes the tensors' buffers, puts the data
// bytes the head read holds into the first of them and leaves in f->rest
// what is still to read (at file offsets).
void SizeImage(uint64_t base, FileRead* f) {
  for (KvTensor& t : f->layout->decoded.block.tensors) t.data.resize(uint64_t{t.n_rows} * t.row_bytes);
  std::vector<std::span<uint8_t>> pieces = f->layout->DataPieces();
  const uint64_t data_offset = f->layout->data_offset;
  std::string_view have = std::string_view(f->head).substr(data_offset);
  uint64_t at = base + data_offset;
  for (std::span<uint8_t> piece : pieces) {
    const size_t n = std::min(piece.size(), have.size());
    if (n > 0) std::memcpy(piece.data(), have.data(), n);
    have.remove_prefix(n);
    piece = piece.subspan(n);
    at += n;
    if (!piece.empty()) {
      f->rest.push_back(piece);
      f->rest_begin.push_back(at);
      at += piece.size();
    }
  }
  f->head = std::string();
}

// Both steps of an image's head on this thread.
Status ReadImageHead(const RangeReader& read, uint64_t base, FileRead* f) {
  AGENTKV_RETURN_IF_ERROR(ParseImageHead(read, base, f));
  SizeImage(base, f);
  return Status::OK();
}

// The parts of f.rest that hold the file's bytes [begin, end).
std::vector<std::span<uint8_t>> PiecesOf(const FileRead& f, uint64_t begin, uint64_t end) {
  std::vector<std::span<uint8_t>> out;
  size_t k = static_cast<size_t>(std::upper_bound(f.rest_begin.begin(), f.rest_begin.end(), begin) -
                                 f.rest_begin.begin()) - 1;
  for (; k < f.rest.size() && f.rest_begin[k] < end; ++k) {
    const uint64_t lo = std::max(begin, f.rest_begin[k]);
    const uint64_t hi = std::min(end, f.rest_begin[k] + f.rest[k].size());
    out.push_back(f.rest[k].subspan(lo - f.rest_begin[k], hi - lo));
  }
  return out;
}

// The file's result once its data is read (chunk_status: its chunks' errors,
// already named): its first failed chunk's error, else the checksum's verdict.
Result<DecodedBlock> Finish(FileRead* f, std::span<const Status> chunk_status, const std::string& path) {
  for (const Status& st : chunk_status) {
    if (!st.ok()) return st;
  }
  Result<DecodedBlock> done = FinishBlockFile(std::move(*f->layout));
  if (!done.ok()) return Named(done.status(), path);
  return done;
}

// A whole block file: its size, then its head (ReadImageHead).
Status ReadHead(FileSystem* fs, const std::string& path, FileRead* f) {
  AGENTKV_ASSIGN_OR_RETURN(f->file_size, fs->FileSize(path));
  return ReadImageHead([fs, &path](uint64_t offset, size_t n) { return fs->ReadRange(path, offset, n); }, 0, f);
}

// Step 1 of the head of the image of `src` in a pack of `pack_bytes` bytes
// (ParseImageHead, read by path), after checking that the image lies inside
// the pack.
Status ParsePackedHead(FileSystem* fs, const BlockSource& src, uint64_t pack_bytes, FileRead* f) {
  if (src.offset > pack_bytes || src.bytes > pack_bytes - src.offset) {
    return Status::Corruption("block file: image at offset " + std::to_string(src.offset) + " (" +
                              std::to_string(src.bytes) + " bytes) outside the pack (" + std::to_string(pack_bytes) +
                              " bytes)");
  }
  f->file_size = src.bytes;
  return ParseImageHead([fs, &src](uint64_t offset, size_t n) { return fs->ReadRange(src.path, offset, n); },
                        src.offset, f);
}

// The rest of a packed image's data (after ReadPackedHead), in one scattered
// read of the pack's stream straight into the tensors' buffers. Leaves the
// checksum to Finish.
Status ReadPackedData(SequentialReadFile* pack, FileRead* f) {
  if (f->rest.empty()) return Status::OK();
  uint64_t want = 0;
  for (std::span<uint8_t> piece : f->rest) want += piece.size();
  AGENTKV_ASSIGN_OR_RETURN(const size_t got, pack->ReadScattered(f->rest_begin.front(), f->rest));
  return got == want ? Status::OK() : Shrank();
}

// Runs tasks in submission order on a thread of its own, or, without one,
// at once on the caller's thread. The destructor waits for every task.
class SerialWorker {
 public:
  explicit SerialWorker(bool own_thread) {
    if (own_thread) thread_ = std::thread([this] { Loop(); });
  }
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;
  ~SerialWorker() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      closing_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void Submit(std::function<void()> task) {
    if (!thread_.joinable()) return task();
    {
      std::lock_guard<std::mutex> l(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return !tasks_.empty() || closing_; });
      if (tasks_.empty()) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      l.unlock();
      task();
      l.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool closing_ = false;                     // guarded by mu_
  std::thread thread_;
};

// One run of images back to back in one pack. This thread reads the
// images' data sections in file order through one open file (so that the OS
// reads ahead of it), each straight into its tensors' buffers. With
// `helper_threads` > 0 the rest happens beside that stream: first every
// image's head is read and checked (small reads on `helper_threads` threads,
// before the stream starts: beside it they waited behind its reads), then
// the buffers are allocated ahead of the stream on `helper_threads` threads
// (allocating costs more CPU than the copy, see BlockReadOptions), and the
// checksums of the images read are verified on one more. With 0, everything
// happens here, image by image. out[k] receives run[k]'s result.
void ReadPackRun(FileSystem* fs, std::span<const BlockSource> run, std::span<std::optional<Result<DecodedBlock>>> out,
                 int helper_threads) {
  const std::string& path = run.front().path;
  Result<std::unique_ptr<SequentialReadFile>> pack = fs->OpenSequentialReads(path);
  if (!pack.ok()) {
    for (auto& r : out) r = pack.status();
    return;
  }
  const bool pipelined = helper_threads > 0;
  std::vector<FileRead> reads(run.size());
  std::vector<Status> head_status(run.size());
  std::vector<std::promise<void>> sized(run.size());
  auto parse_head = [&](size_t k) { head_status[k] = ParsePackedHead(fs, run[k], (*pack)->size(), &reads[k]); };
  auto size_image = [&](size_t k) {
    if (head_status[k].ok()) SizeImage(run[k].offset, &reads[k]);
    sized[k].set_value();
  };
  // Declared after what their tasks touch: done before those go.
  SerialWorker hasher(pipelined);
  std::jthread allocator;
  if (pipelined) {
    ParallelFor(run.size(), helper_threads, parse_head);
    allocator = std::jthread([&] { ParallelFor(run.size(), helper_threads, size_image); });
  }
  for (size_t k = 0; k < run.size(); ++k) {
    if (pipelined) {
      sized[k].get_future().wait();
    } else {
      parse_head(k);
      size_image(k);
    }
    Status st = head_status[k];
    if (st.ok()) st = ReadPackedData(pack->get(), &reads[k]);
    if (!st.ok()) {
      out[k] = Named(st, path);
      continue;
    }
    hasher.Submit([&reads, out, k, &path] { out[k] = Finish(&reads[k], {}, path); });
  }
}

// Whether `next` continues the pack run that `prev` is in.
bool ContinuesRun(const BlockSource& prev, const BlockSource& next) {
  return prev.packed && next.packed && prev.path == next.path && prev.offset + prev.bytes == next.offset;
}

}  // namespace

size_t BlockReadChunkBytes(uint64_t data_bytes, int n_threads) {
  constexpr uint64_t kAlign = 64 << 10;
  const uint64_t reads = 2 * static_cast<uint64_t>(std::max(1, n_threads));
  const uint64_t per_read = ((data_bytes + reads - 1) / reads + kAlign - 1) / kAlign * kAlign;  // rounded up
  return static_cast<size_t>(std::clamp<uint64_t>(per_read, kMinBlockReadChunkBytes, uint64_t{1} << 40));
}

Result<DecodedBlock> ReadBlockFile(FileSystem* fs, const std::string& path) {
  BlockReadOptions options;
  options.n_threads = 1;
  options.chunk_bytes = 0;
  return std::move(ReadBlockFiles(fs, std::span<const std::string>(&path, 1), options)[0]);
}

std::vector<Result<DecodedBlock>> ReadBlockFiles(FileSystem* fs, std::span<const std::string> paths,
                                                 const BlockReadOptions& options) {
  std::vector<FileRead> files(paths.size());

  // A file's head: its size, header and structural checks, its tensors'
  // buffers; then the chunks of its remaining data, ending on multiples of
  // chunk_bytes (none if the file is done: bad header, or all data in the head).
  auto read_head = [&](size_t i) {
    FileRead& f = files[i];
    std::vector<Chunk> chunks;
    if (Status st = ReadHead(fs, paths[i], &f); !st.ok()) {
      f.result = Named(st, paths[i]);
    } else if (f.rest.empty()) {
      f.result = Finish(&f, {}, paths[i]);
    } else {
      for (uint64_t begin = f.rest_begin.front(); begin < f.file_size;) {
        uint64_t end = f.file_size;
        if (options.chunk_bytes > 0) end = std::min(end, (begin / options.chunk_bytes + 1) * options.chunk_bytes);
        chunks.push_back({i, chunks.size(), begin, end});
        begin = end;
      }
      f.chunk_status.resize(chunks.size());
      f.chunks_left.store(chunks.size(), std::memory_order_relaxed);
    }
    return chunks;
  };
  // One chunk, read in place; the file's last chunk (whichever thread reads
  // it) checks the file. acq_rel makes the other chunks' bytes and statuses
  // visible to that thread.
  auto read_chunk = [&](const Chunk& chunk) {
    FileRead& f = files[chunk.file];
    const std::string& path = paths[chunk.file];
    Status& st = f.chunk_status[chunk.index];
    if (!f.failed.load(std::memory_order_relaxed)) {
      std::vector<std::span<uint8_t>> pieces = PiecesOf(f, chunk.begin, chunk.end);
      Result<size_t> got = fs->ReadScattered(path, chunk.begin, pieces);
      if (!got.ok()) {
        st = got.status();
      } else if (*got != chunk.end - chunk.begin) {
        st = Shrank();
      }
      if (!st.ok()) {
        st = Named(st, path);
        f.failed.store(true, std::memory_order_relaxed);
      }
    }
    if (f.chunks_left.fetch_sub(1, std::memory_order_acq_rel) == 1) f.result = Finish(&f, f.chunk_status, path);
  };

  // Every reader takes a ready chunk if there is one, else the next head, so
  // that data reads start with the first header and a file's buffers are
  // allocated while other files' data is on its way; with one reader that is
  // file by file, each head before its chunks, in order.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Chunk> ready;   // guarded by mu
  size_t next_head = 0;      // guarded by mu
  size_t heads_reading = 0;  // guarded by mu
  auto reader = [&](size_t) {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      if (!ready.empty()) {
        const Chunk chunk = ready.front();
        ready.pop_front();
        l.unlock();
        read_chunk(chunk);
        l.lock();
      } else if (next_head < files.size()) {
        const size_t i = next_head++;
        ++heads_reading;
        l.unlock();
        std::vector<Chunk> chunks = read_head(i);
        l.lock();
        --heads_reading;
        ready.insert(ready.end(), chunks.begin(), chunks.end());
        if (!chunks.empty() || heads_reading == 0) cv.notify_all();
      } else if (heads_reading > 0) {
        cv.wait(l);  // for chunks, or for the last head to end the call
      } else {
        return;
      }
    }
  };
  const int n_readers = std::max(1, options.n_threads);
  ParallelFor(static_cast<size_t>(n_readers), n_readers, reader);

  std::vector<Result<DecodedBlock>> out;
  out.reserve(files.size());
  for (FileRead& f : files) out.push_back(std::move(*f.result));
  return out;
}

std::vector<Result<DecodedBlock>> ReadBlockSources(FileSystem* fs, std::span<const BlockSource> sources,
                                                   const BlockReadOptions& options) {
  std::vector<std::optional<Result<DecodedBlock>>> out(sources.size());
  std::span<std::optional<Result<DecodedBlock>>> out_span(out);
  std::vector<size_t> files;
  std::vector<std::string> file_paths;
  std::vector<std::pair<size_t, size_t>> runs;  // [begin, end) of sources
  for (size_t i = 0; i < sources.size();) {
    if (!sources[i].packed) {
      files.push_back(i);
      file_paths.push_back(sources[i].path);
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < sources.size() && ContinuesRun(sources[end - 1], sources[end])) ++end;
    runs.emplace_back(i, end);
    i = end;
  }
  // One stream per pack run, on a thread of its own when reads may overlap:
  // parallel readers of one file slow a virtual disk down (bench/RESULTS.md).
  const bool parallel = options.n_threads > 1;
  const int helper_threads = parallel ? std::max(1, options.pack_helper_threads) : 0;
  std::vector<std::thread> run_threads;
  for (const auto& [begin, end] : runs) {
    auto read_run = [fs, sources, out_span, helper_threads, begin = begin, end = end] {
      ReadPackRun(fs, sources.subspan(begin, end - begin), out_span.subspan(begin, end - begin), helper_threads);
    };
    if (parallel) {
      run_threads.emplace_back(read_run);
    } else {
      read_run();
    }
  }
  if (!files.empty()) {
    std::vector<Result<DecodedBlock>> read = ReadBlockFiles(fs, file_paths, options);
    for (size_t k = 0; k < files.size(); ++k) out[files[k]] = std::move(read[k]);
  }
  for (std::thread& t : run_threads) t.join();
  std::vector<Result<DecodedBlock>> results;
  results.reserve(out.size());
  for (auto& r : out) results.push_back(std::move(*r));
  return results;
}

}  // namespace agentkv
