#include "store/block_read.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

#include "util/parallel.h"

namespace agentkv {
namespace {

// One file of a ReadBlockFiles call, from its head read to its checksum.
struct FileRead {
  std::optional<BlockFileLayout> layout;  // once the header checked out
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

// Size, head, every structural check of the header, the data bytes the head
// read already holds; leaves in f->rest what is still to read.
Status ReadHead(FileSystem* fs, const std::string& path, const std::shared_ptr<WarmMemory>& reserve, FileRead* f) {
  AGENTKV_ASSIGN_OR_RETURN(f->file_size, fs->FileSize(path));
  AGENTKV_ASSIGN_OR_RETURN(std::string head,
                           fs->ReadRange(path, 0, static_cast<size_t>(std::min<uint64_t>(f->file_size, kBlockHeadReadBytes))));
  AGENTKV_ASSIGN_OR_RETURN(const uint64_t data_offset, BlockDataOffset(head, f->file_size));
  if (head.size() < data_offset) {  // a header longer than the first read
    AGENTKV_ASSIGN_OR_RETURN(std::string more, fs->ReadRange(path, head.size(), data_offset - head.size()));
    head += more;
    if (head.size() < data_offset) return Shrank();
  }
  AGENTKV_ASSIGN_OR_RETURN(BlockFileLayout layout,
                           DecodeBlockHeader(std::string_view(head).substr(0, data_offset), f->file_size, reserve));
  f->layout = std::move(layout);

  // The data bytes the head read already holds go into the first pieces.
  std::vector<std::span<uint8_t>> pieces = f->layout->DataPieces();
  std::string_view have = std::string_view(head).substr(data_offset);
  uint64_t at = data_offset;
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

}  // namespace

size_t BlockReadChunkBytes(uint64_t data_bytes, int n_threads) {
  constexpr uint64_t kAlign = 64 << 10;
  const uint64_t reads = 2 * static_cast<uint64_t>(std::max(1, n_threads));
  const uint64_t per_read = ((data_bytes + reads - 1) / reads + kAlign - 1) / kAlign * kAlign;  // rounded up
  return static_cast<size_t>(std::clamp<uint64_t>(per_read, kMinBlockReadChunkBytes, uint64_t{1} << 40));
}

size_t StreamReadChunkBytes(uint64_t data_bytes, int n_threads) {
  constexpr uint64_t kAlign = 64 << 10;
  const uint64_t reads = 8 * static_cast<uint64_t>(std::max(1, n_threads));
  const uint64_t per_read = ((data_bytes + reads - 1) / reads + kAlign - 1) / kAlign * kAlign;  // rounded up
  return static_cast<size_t>(std::max<uint64_t>(per_read, kAlign));
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
    if (Status st = ReadHead(fs, paths[i], options.reserve, &f); !st.ok()) {
      f.result = Named(st, paths[i]);
      return chunks;
    }
    if (options.on_data_read) {
      const uint64_t head_data_end = f.rest.empty() ? f.file_size : f.rest_begin.front();
      if (head_data_end > f.layout->data_offset) {
        options.on_data_read(i, *f.layout, 0, head_data_end - f.layout->data_offset);
      }
    }
    if (f.rest.empty()) {
      f.result = Finish(&f, {}, paths[i]);
      if (f.result->ok() && options.on_file_read) options.on_file_read(i, **f.result);
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
      } else if (options.on_data_read) {
        options.on_data_read(chunk.file, *f.layout, chunk.begin - f.layout->data_offset,
                             chunk.end - f.layout->data_offset);
      }
    }
    if (f.chunks_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      f.result = Finish(&f, f.chunk_status, path);
      if (f.result->ok() && options.on_file_read) options.on_file_read(chunk.file, **f.result);
    }
  };

  // Every reader takes a ready chunk if there is one, else the next head, so
  // that data reads start with the first header and a file's buffers are
  // allocated while other files' data is on its way; with one reader that is
  // file by file, each head before its chunks, in order. (offset_major: the
  // heads first, then the chunks by offset.)
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Chunk> ready;   // guarded by mu
  size_t next_head = 0;      // guarded by mu
  size_t heads_reading = 0;  // guarded by mu
  auto reader = [&](size_t) {
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      // offset_major reads every head first: a file's chunks can only be
      // ordered among the others' once their heads are read.
      const bool head_first = options.offset_major && next_head < files.size();
      if (!ready.empty() && !head_first) {
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
        if (options.offset_major) {
          // Each chunk before the first queued one that starts further into its file.
          for (const Chunk& c : chunks) {
            const uint64_t at = c.begin - files[c.file].layout->data_offset;
            auto pos = std::find_if(ready.begin(), ready.end(), [&](const Chunk& q) {
              return q.begin - files[q.file].layout->data_offset > at;
            });
            ready.insert(pos, c);
          }
        } else {
          ready.insert(ready.end(), chunks.begin(), chunks.end());
        }
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

}  // namespace agentkv
