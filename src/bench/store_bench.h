#pragma once
// Save/load throughput of the disk tier (AgentStore) next to plain POSIX I/O
// of the same bytes on the same disk: the measurement behind
// `agentkv bench store`.
//
// Each repetition, in namespace options.ns under options.cache_dir:
//   1. delete the previous repetition's agent (untimed), so every block file
//      is written again;
//   2. save:       AgentStore::SaveAgent of a fresh agent id (temp files,
//                  fsyncs, renames, manifest: the whole commit);
//   3. load cold:  fill the read reserve (options.read_reserve, untimed), drop
//                  the namespace's files from the page cache (fdatasync +
//                  POSIX_FADV_DONTNEED; the resident fraction is measured with
//                  mincore afterwards), then LoadBlocks (reads, checksums,
//                  parses every block);
//   4. load warm:  LoadBlocks again, files now in the page cache;
//   5. plain write: one file of the block files' total size, write() + fsync;
//   6. plain read:  that file after dropping it, read() into a 1 MiB buffer;
//   7. plain read of the block files themselves, after dropping them.
// At the end the agent and the plain file are removed.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/context.h"
#include "store/agent_record.h"
#include "store/kv_block.h"
#include "util/status.h"

namespace agentkv::bench {

// The agent to save: its record (agent_id is replaced per repetition) and
// its blocks, plus the store identity they belong to.
struct StoreBenchInput {
  AgentRecord record;
  std::vector<KvBlock> blocks;
  std::string fingerprint;
  std::string kv_types;
  std::string source;  // how the KV was made, for the report
};

// Prefills n_tokens seeded random tokens into slot 0 of `ctx` and exports the
// slot's blocks (the slot is cleared afterwards). REQUIRES n_tokens >= 1,
// n_tokens <= ctx.options().slot_ctx.
Result<StoreBenchInput> InputFromModel(engine::Context& ctx, int n_tokens, uint64_t seed);

// Random KV bytes without a model: n_layers layers of K and V rows of
// row_bytes each. The default is the bundled model's q4_0 layout (8 layers,
// 72-byte rows: 1152 bytes/token); Llama-3.1-8B's is 32 x 576 (8 KV heads
// x 128 dims of q4_0). REQUIRES n_layers >= 1, row_bytes >= 1.
StoreBenchInput SyntheticInput(int n_tokens, uint64_t seed, uint32_t n_layers = 8, uint32_t row_bytes = 72);

struct StoreBenchOptions {
  std::string cache_dir;          // REQUIRES non-empty; created if absent
  std::string ns = "agentkv-bench";
  int reps = 5;                   // REQUIRES >= 1
  std::function<void(const std::string&)> log;  // progress lines; may be null
  // AgentStoreOptions' read_threads / read_chunk_bytes for the loads; unset: the store's defaults
  // (read_chunk_bytes 0: one read per block file).
  std::optional<int> read_threads;
  std::optional<size_t> read_chunk_bytes;
  // As a server's read reserve (sched::SchedulerOptions::read_reserve): before
  // each cold load, untimed, the store's read reserve holds the agent's
  // blocks' tensor sizes faulted in (the previous repetition's blocks came
  // back to it). false: the loads' tensors are fresh memory or whatever malloc
  // reuses, and the reserve is emptied.
  bool read_reserve = true;
};

struct StoreBenchRep {
  double save_ms = 0;
  double load_cold_ms = 0;
  double load_warm_ms = 0;
  double plain_write_ms = 0;
  double plain_read_ms = 0;
  double plain_read_blocks_ms = 0;
  double store_resident_after_drop = 0;  // fraction of store file pages still cached before load_cold
  double plain_resident_after_drop = 0;  // same for the plain file before plain_read
};

struct StoreBenchResult {
  uint32_t n_tokens = 0;
  uint32_t n_blocks = 0;
  uint64_t payload_bytes = 0;    // KV bytes (tensor payload)
  uint64_t block_file_bytes = 0; // block files on disk (payload + headers)
  uint64_t manifest_bytes = 0;
  bool drop_accepted = true;     // every posix_fadvise(DONTNEED) call succeeded
  std::string drop_error;        // first failure, if any
  std::vector<StoreBenchRep> reps;
};

// Runs the repetitions above. Errors: store and file errors as returned,
// Internal if a save did not write every block or a load was incomplete.
Result<StoreBenchResult> RunStoreBench(const StoreBenchInput& input, const StoreBenchOptions& options);

}  // namespace agentkv::bench
