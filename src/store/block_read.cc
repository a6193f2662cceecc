#include "store/block_read.h"

#include <algorithm>
#include <atomic>
#include <cstring>
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
  size_t first_chunk = 0, n_chunks = 0;  // its range in the call's chunk list
  std::atomic<size_t> chunks_left{0};
  std::atomic<bool> failed{false};       // a chunk failed: skip the others
  std::optional<Result<DecodedBlock>> result;
};

// One read of a data section: file `file`, bytes [begin, end).
struct Chunk {
  size_t file;
  uint64_t begin, end;
};

// Corruption names the file (the file system's own errors already do).
Status Named(const Status& st, const std::string& path) {
  return st.code() == StatusCode::kCorruption ? st.WithContext(path) : st;
}

Status Shrank() { return Status::Corruption("block file: shrank while read"); }

// Size, head, every structural check of the header, the data bytes the head
// read already holds; leaves in f->rest what is still to read.
Status ReadHead(FileSystem* fs, const std::string& path, FileRead* f) {
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
                           DecodeBlockHeader(std::string_view(head).substr(0, data_offset), f->file_size));
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

Result<DecodedBlock> ReadBlockFile(FileSystem* fs, const std::string& path) {
  BlockReadOptions options;
  options.n_threads = 1;
  options.chunk_bytes = 0;
  return std::move(ReadBlockFiles(fs, std::span<const std::string>(&path, 1), options)[0]);
}

std::vector<Result<DecodedBlock>> ReadBlockFiles(FileSystem* fs, std::span<const std::string> paths,
                                                 const BlockReadOptions& options) {
  std::vector<FileRead> files(paths.size());
  // 1. Heads: a file whose header is bad, or whose data the head read holds
  //    whole, is done here.
  ParallelFor(paths.size(), options.n_threads, [&](size_t i) {
    FileRead& f = files[i];
    if (Status st = ReadHead(fs, paths[i], &f); !st.ok()) {
      f.result = Named(st, paths[i]);
    } else if (f.rest.empty()) {
      f.result = Finish(&f, {}, paths[i]);
    }
  });

  // 2. Data: every file's remaining bytes as chunks ending on multiples of
  //    chunk_bytes, all files' chunks in one loop.
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < files.size(); ++i) {
    FileRead& f = files[i];
    if (f.result) continue;
    f.first_chunk = chunks.size();
    for (uint64_t begin = f.rest_begin.front(); begin < f.file_size;) {
      uint64_t end = f.file_size;
      if (options.chunk_bytes > 0) end = std::min(end, (begin / options.chunk_bytes + 1) * options.chunk_bytes);
      chunks.push_back({i, begin, end});
      begin = end;
    }
    f.n_chunks = chunks.size() - f.first_chunk;
    f.chunks_left.store(f.n_chunks, std::memory_order_relaxed);
  }
  std::vector<Status> chunk_status(chunks.size());
  ParallelFor(chunks.size(), options.n_threads, [&](size_t c) {
    const Chunk& chunk = chunks[c];
    FileRead& f = files[chunk.file];
    const std::string& path = paths[chunk.file];
    if (!f.failed.load(std::memory_order_relaxed)) {
      std::vector<std::span<uint8_t>> pieces = PiecesOf(f, chunk.begin, chunk.end);
      Result<size_t> got = fs->ReadScattered(path, chunk.begin, pieces);
      if (!got.ok()) {
        chunk_status[c] = got.status();
      } else if (*got != chunk.end - chunk.begin) {
        chunk_status[c] = Shrank();
      }
      if (!chunk_status[c].ok()) {
        chunk_status[c] = Named(chunk_status[c], path);
        f.failed.store(true, std::memory_order_relaxed);
      }
    }
    // 3. The file's last chunk (whichever thread reads it) checks the file;
    //    acq_rel makes the other chunks' bytes and statuses visible here.
    if (f.chunks_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      f.result = Finish(&f, std::span<const Status>(chunk_status).subspan(f.first_chunk, f.n_chunks), path);
    }
  });

  std::vector<Result<DecodedBlock>> out;
  out.reserve(files.size());
  for (FileRead& f : files) out.push_back(std::move(*f.result));
  return out;
}

}  // namespace agentkv
