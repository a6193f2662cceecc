#pragma once
// Throughput of the engine's restore and export path (blocks <-> llama.cpp
// state <-> the context's KV tensors): the measurement behind
// `agentkv bench restore`. Needs no prefill: the agent's KV is a one-token
// probe's rows replicated to n_tokens positions (valid bytes of the model's
// real layout; the values do not matter for copies).

#include <cstdint>
#include <vector>

#include "engine/context.h"
#include "store/kv_block.h"
#include "util/status.h"

namespace agentkv::bench {

// One repetition, milliseconds.
struct RestoreRep {
  double write_state_ms = 0;   // WriteBlocksState: blocks -> llama state bytes (host memcpy)
  double set_state_ms = 0;     // llama_state_seq_set_data_ext: state bytes -> KV tensors (host->device on a GPU)
  double import_ms = 0;        // Context::ImportSlotBlocks: both, as the scheduler runs them
  double get_state_ms = 0;     // llama_state_seq_get_data_ext: KV tensors -> state bytes
  double state_to_blocks_ms = 0;  // StateToBlocks: state bytes -> blocks
  double export_ms = 0;        // Context::ExportSlotBlocks: both, as the scheduler runs them
};

struct RestoreBenchResult {
  uint32_t n_tokens = 0;
  uint64_t kv_bytes = 0;     // payload of the blocks (what is copied)
  uint64_t state_bytes = 0;  // llama.cpp state size for the same positions
  std::vector<RestoreRep> reps;
};

// Blocks covering n_tokens positions whose every row is the row of `probe`
// (a one-token export: block 0 with one row per tensor). REQUIRES n_tokens >= 1.
std::vector<KvBlock> ReplicateProbeRows(const KvBlock& probe, uint32_t n_tokens);

// Imports and exports slot 0 of `ctx` reps times (after one untimed warm-up),
// timing each stage. REQUIRES n_tokens < ctx.options().slot_ctx. Leaves slot 0 empty.
Result<RestoreBenchResult> RunRestoreBench(engine::Context& ctx, uint32_t n_tokens, int reps);

}  // namespace agentkv::bench
