#pragma once
// The default context per slot (`agentkv serve` without -c, or -c 0): the
// model's trained context, as llama-server's -c 0, capped by what the slots'
// KV cache can take of the memory it lives in. ChooseSlotContext is a pure
// function of numbers (tested without a model); the probes below measure them.

#include <cstdint>
#include <string>

#include "engine/kv_type.h"

namespace agentkv::engine {

struct ModelInfo;

// Positions are chosen in whole blocks (store/kv_block.h's kBlockTokens).
inline constexpr int32_t kContextGranuleTokens = 256;
// Never chosen below this (or below n_ctx_train when that is smaller): a
// context too small for any agent's prompt is worse than a tight fit.
inline constexpr int32_t kMinDefaultContextTokens = 2048;
// Share of the available memory left to llama.cpp's compute buffers, the
// allocator's slack and everything else that is not KV.
inline constexpr double kContextHeadroomFraction = 0.10;

struct ContextSizeInput {
  int32_t n_ctx_train = 0;          // the model's trained context (0: unknown -> the floor)
  int n_slots = 1;                  // slots, each with the whole context
  // One slot's K+V for one position, in the slots' types; 0: memory is
  // unknown, no cap.
  uint64_t kv_bytes_per_token = 0;
  // Bytes the slots' KV may take before headroom: the GPU's free memory
  // once the weights are loaded, or on the CPU physical RAM less the
  // weights and the RAM pool's budget.
  uint64_t available_bytes = 0;
  const char* memory_name = "RAM";  // "RAM" or "GPU memory", for `reason`
  // Host buffers that also grow with the context, per position: the staging
  // buffer and the read landing (one slot's state each, in the slots' type)
  // and the read reserve (one slot's blocks at rest). They live in RAM:
  // beside the slots when host_available_bytes is 0 (slots on the CPU),
  // else in host_available_bytes of RAM of their own (slots on a GPU).
  uint64_t host_bytes_per_token = 0;
  uint64_t host_available_bytes = 0;
};

struct ContextSizeChoice {
  int32_t slot_ctx = 0;  // positions per slot; a multiple of 256 unless n_ctx_train is smaller
  bool capped = false;   // below n_ctx_train because of memory
  bool at_floor = false; // memory allows less than the floor; the floor was taken anyway
  std::string reason;    // one line for the start log, with the numbers
};

// slot_ctx = min(n_ctx_train, fit) rounded down to a multiple of 256, where
// fit = available_bytes x (1 - headroom) / (n_slots x kv_bytes_per_token
// [+ host_bytes_per_token when they share that memory]), and, with host
// buffers in RAM of their own, also <= host_available_bytes x (1 - headroom)
// / host_bytes_per_token; never below min(kMinDefaultContextTokens,
// n_ctx_train). Never fails.
ContextSizeChoice ChooseSlotContext(const ContextSizeInput& in);

// One slot's K+V bytes per position in types k/v, from the model's
// hyperparameters (every layer full attention, n_head_kv heads of
// n_embd_head_k / n_embd_head_v values): an upper bound for sliding-window
// models, exact for the usual dense ones. Context's ModelCacheSpec is exact,
// but it exists only once the context does.
uint64_t EstimateKvBytesPerToken(const ModelInfo& info, KvType k, KvType v);

// The default --prefill-chunk (prompt tokens a step may feed, and the
// context's n_batch): 2048 with layers on a GPU, 512 on the CPU. On the H200
// (8B shape, 32 agents sharing a 4K system text on 16 slots) 2048 took
// 1/1.10 of 512's time over 3 interleaved pairs (bench/RESULTS.md, "Agent
// team (H200)"); on the CPU a step's prefill already saturates the cores at
// 512 and a longer one only delays the other agents' next token.
inline constexpr int kCpuPrefillChunk = 512;
inline constexpr int kGpuPrefillChunk = 2048;
// `requested` > 0 is taken as is; 0 picks by where the layers run.
int ChoosePrefillChunk(int requested, int n_gpu_layers);

// Free bytes summed over the GPU devices llama.cpp sees (0 when none).
uint64_t FreeGpuMemoryBytes();
// Physical RAM in bytes (0 when unknown).
uint64_t PhysicalRamBytes();

}  // namespace agentkv::engine
