#pragma once
// Reading block files from a FileSystem with their tensor data read straight
// into the decoded tensors (no whole-file buffer, no copy of the payload):
// one file (ReadBlockFile), or an agent's many files at once with the data
// sections split into chunks read in parallel (ReadBlockFiles).

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "store/block_file.h"
#include "store/file_system.h"
#include "util/status.h"

namespace agentkv {

// The first read of each file: its header and, usually, the start of its data.
inline constexpr size_t kBlockHeadReadBytes = 64 << 10;

// The size of ReadBlockFiles' data reads for a load of `data_bytes` by
// `n_threads` readers: about two reads per reader over the whole load, a
// multiple of 64 KiB, at least kMinBlockReadChunkBytes. So an agent of a few
// large files is split into enough reads to keep every reader busy (an
// 8B-shape agent of 2,048 tokens, 8 files of 9.4 MB, by 32 readers: reads of
// 1.2 MB), while an agent of more files than readers is read a file per read
// (32K tokens, 136 files: 20 MB > a file), which keeps each read as long as
// the kernel's readahead likes it (bench/HISTORY.md, "chunked block reads").
inline constexpr size_t kMinBlockReadChunkBytes = 1 << 20;
size_t BlockReadChunkBytes(uint64_t data_bytes, int n_threads);
// The same for a streaming read (BlockReadOptions::offset_major, whose
// reader follows the data as it comes): about eight reads per reader, at
// least 64 KiB, so that the data comes in many small steps (layer by layer,
// for block files) rather than in two waves.
size_t StreamReadChunkBytes(uint64_t data_bytes, int n_threads);

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
  // Split each data section into reads of at most this many bytes, ending at
  // file offsets that are multiples of it (see BlockReadChunkBytes); 0: one
  // read per data section.
  size_t chunk_bytes = 0;
  // Called once per file that read and verified in full (what the result
  // will hold for it), on the thread that verified it, before ReadBlockFiles
  // returns: so a caller can use a block while other files are still read.
  // Calls for different files may run concurrently. May be empty.
  std::function<void(size_t file, const DecodedBlock& block)> on_file_read;
  // Called once a range of a file's data section is in its tensors: data
  // bytes [begin, end) (offsets from the data section's start), the head
  // read's share and then each chunk, before the file is verified (its
  // checksum may still fail: on_file_read says when it passed). `layout` is
  // the file's: layout.decoded.block's tensors in layout.file_order tile the
  // data section. On the thread that read the range; calls for one file may
  // run concurrently (distinct ranges). May be empty.
  std::function<void(size_t file, const BlockFileLayout& layout, uint64_t begin, uint64_t end)> on_data_read;
  // Hand out the chunks of all files by their offset in the data section
  // (every file's first chunk, then every file's second, ...) rather than
  // file by file: the files fill up evenly, so bytes at the same offset of
  // every file (the same layer's rows, for block files) come in together.
  bool offset_major = false;
  // Where the tensors' buffers come from (DecodeBlockHeader): buffers of the
  // sizes it holds are taken from it (pages already faulted in). May be null.
  std::shared_ptr<WarmMemory> reserve;
};

// Reads the block files at `paths`; element i of the result is what
// ReadBlockFile(fs, paths[i]) returns (same checks, same errors), files
// failing independently: an I/O error or bad bytes in one chunk fail that
// file only. n_threads readers share one queue of work: a file's head (size,
// header, every structural check, the tensors' buffers sized) and, once its
// head checked out, the chunks of its data section, each read straight into
// the tensors' buffers; a reader takes a ready chunk before the next head, so
// that a few large files still keep n_threads reads in flight. The thread
// that reads a file's last chunk verifies its checksum. Blocks the caller
// until all is done; the readers are util/parallel.h threads of this call.
// Thread-safe if `fs` is and ConcurrentReads() (or options.n_threads <= 1).
std::vector<Result<DecodedBlock>> ReadBlockFiles(FileSystem* fs, std::span<const std::string> paths,
                                                 const BlockReadOptions& options);

}  // namespace agentkv
