#pragma once
// BlockFilesReader: how AgentStore reads block files without its lock. It
// owns what a read needs and the index does not: the file system's reads in
// flight (twice the cores, 8 to 32, unless set), the size of each read, the
// kept reader threads (util/parallel.h WorkerTeam), and the read reserve the
// tensors' buffers come from (util/warm_memory.h). It knows no namespace,
// agent, index or lock: callers hand it paths and sizes, and check and
// account what it read themselves (AgentStore::ReadBlockLocked).
//
// Thread safety: every method may be called from any thread; an Ahead is
// used by the thread that started it.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/block_read.h"
#include "store/file_system.h"
#include "util/warm_memory.h"

namespace agentkv {

class BlockFilesReader {
 public:
  // fs: not owned, outlives the reader. read_threads 0: the default (above);
  // read_chunk_bytes unset: BlockReadChunkBytes (StreamReadChunkBytes when
  // streaming) of the files' bytes; 0: one read per file.
  BlockFilesReader(FileSystem* fs, int read_threads, std::optional<size_t> read_chunk_bytes)
      : fs_(fs), read_threads_(read_threads), read_chunk_bytes_(read_chunk_bytes) {}

  // Whether files are read in parallel (else callers read them one by one,
  // in order, with ReadBlockFile).
  bool concurrent() const { return fs_->ConcurrentReads(); }
  WarmMemory& reserve() const { return *reserve_; }

  // How to read block files of these sizes at once (ReadBlockFiles): no more
  // threads than reads, chunks sized as above, buffers from the reserve.
  BlockReadOptions OptionsFor(const std::vector<uint64_t>& file_bytes, bool streaming = false) const;
  // ReadBlockFiles of `paths` (sizes `file_bytes`) on the calling thread.
  std::vector<Result<DecodedBlock>> Read(const std::vector<std::string>& paths,
                                         const std::vector<uint64_t>& file_bytes) const;

  // Starts the threads an Ahead reads with when started on this thread, then
  // runs on_each_reader(i, n) on each of the n readers (the caller's thread
  // when reads are not concurrent) and returns when all have.
  void StartThreads(const std::function<void(size_t reader, size_t n_readers)>& on_each_reader) const;

  // One read of block files on a worker of the starting thread's WorkerTeam
  // while that thread does something else (LoadBlocks reads the manifest).
  class Ahead {
   public:
    Ahead(const Ahead&) = delete;
    Ahead& operator=(const Ahead&) = delete;
    ~Ahead();  // Wait()s if not yet waited for

    // Waits for the read; element k is paths[k]'s, as ReadBlockFiles gives it.
    std::vector<Result<DecodedBlock>> Wait();

    // For a load's debug line, after Wait().
    const BlockReadOptions& options() const { return options_; }
    uint64_t bytes() const { return bytes_; }
    double reader_ms() const { return reader_ms_; }
    // When the first and the last file finished (ms into the read): how much
    // of the read a restore in pieces could overlap.
    double first_file_ms() const { return first_file_ms_.load(); }
    double last_file_ms() const { return last_file_ms_.load(); }
    // What the whole process used meanwhile (every thread: the readers' page
    // faults and system time); measured only when debug logging is on.
    long minor_faults() const { return minor_faults_; }
    double user_ms() const { return user_ms_; }
    double sys_ms() const { return sys_ms_; }

   private:
    friend class BlockFilesReader;
    Ahead() = default;

    BlockReadOptions options_;
    std::vector<std::string> paths_;
    uint64_t bytes_ = 0;
    std::function<void(size_t)> job_;
    bool waited_ = false;
    std::vector<Result<DecodedBlock>> read_;
    double reader_ms_ = 0;
    std::atomic<double> first_file_ms_{-1}, last_file_ms_{0};
    long minor_faults_ = 0;
    double user_ms_ = 0, sys_ms_ = 0;
  };
  // Starts reading `paths` (sizes `file_bytes`); `on_file_read` and
  // `on_data_read` (either may be empty) as BlockReadOptions', on the
  // readers; `streaming`: chunks handed out by offset (offset_major).
  // REQUIRES: concurrent().
  std::unique_ptr<Ahead> StartAhead(std::vector<std::string> paths, const std::vector<uint64_t>& file_bytes,
                                    bool streaming,
                                    std::function<void(size_t file, const DecodedBlock& block)> on_file_read,
                                    decltype(BlockReadOptions::on_data_read) on_data_read) const;

 private:
  int Threads() const;

  FileSystem* const fs_;
  const int read_threads_;
  const std::optional<size_t> read_chunk_bytes_;
  // Shared with every tensor read into its buffers (BlockReadOptions::reserve).
  const std::shared_ptr<WarmMemory> reserve_ = std::make_shared<WarmMemory>();
};

}  // namespace agentkv
