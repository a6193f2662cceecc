#pragma once
// Reading block files from a FileSystem with their tensor data read straight
// into the decoded tensors (no whole-file buffer, no copy of the payload):
// one file (ReadBlockFile), or an agent's many files at once with the data
// sections split into chunks read in parallel (ReadBlockFiles).

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "store/block_file.h"
#include "store/file_system.h"
#include "util/status.h"

namespace agentkv {

// The first read of each file: its header and, usually, the start of its data.
inline constexpr size_t kBlockHeadReadBytes = 64 << 10;

// Data reads of ReadBlockFiles: at most this many bytes each, ending at file
// offsets that are multiples of it. 1 MiB: an 8B-shape agent of 2,048 tokens
// (8 files of 9.4 MB) is ~72 reads, enough to keep 32 in flight, while each
// read stays large for the disk (bench/RESULTS.md, "chunked block reads").
inline constexpr size_t kBlockReadChunkBytes = 1 << 20;

// Reads and fully verifies the block file at `path` (the checks of
// DecodeBlockFile, block_file.h): its size, then its first kBlockHeadReadBytes
// (header and, usually, the start of the data), then the rest of the data
// section scattered into the tensors' buffers in one read, then the checksum.
// Errors: the file system's (NotFound, IOError) as they come; bad bytes, or a
// file that changes size while it is read, are Corruption("PATH: block file:
// ..."). Thread-safe if `fs` is.
Result<DecodedBlock> ReadBlockFile(FileSystem* fs, const std::string& path);

struct BlockReadOptions {
  // Reads in flight at once (the caller's thread is one of the readers).
  // <= 1: every read on the caller's thread, in file order, then chunk order
  // (what a file system without ConcurrentReads() needs).
  int n_threads = 1;
  // Split each data section into reads of at most this many bytes (see
  // kBlockReadChunkBytes); 0: one read per data section.
  size_t chunk_bytes = kBlockReadChunkBytes;
};

// Reads the block files at `paths`; element i of the result is what
// ReadBlockFile(fs, paths[i]) returns (same checks, same errors), files
// failing independently: an I/O error or bad bytes in one chunk fail that
// file only. In three steps: every file's size and head (structural checks of
// the header before any data is read), then all data chunks of all files as
// one parallel loop, each read straight into the tensors' buffers, then the
// checksum of a file, by whichever thread read its last chunk. Blocks the
// caller until all is done; uses util/parallel.h's threads for the call.
// Thread-safe if `fs` is and ConcurrentReads() (or options.n_threads <= 1).
std::vector<Result<DecodedBlock>> ReadBlockFiles(FileSystem* fs, std::span<const std::string> paths,
                                                 const BlockReadOptions& options);

}  // namespace agentkv
