#pragma once
// The oracle of hybrid slots (test helper, shared by engine_test and
// engine_arch_test). With slots in another KV type than the blocks (f16
// slots, q4_0 at rest) a restored agent is no longer bit-identical to a cold
// prefill: its rows went through the at-rest type. It must be bit-identical
// to a cold slot whose cache went through the same round trip:
//
//   slot 0 (A): prefill `head`, export blocks, import them back into A
//   slot 2 (B): import the same blocks, as a restore would
//   slot 1 (C): prefill `head`, untouched (the quality reference)
//
// then `next` is decoded in each (one at a time: the same batch shape) and
// n_greedy greedy tokens follow.

#include <cstdint>
#include <vector>

#include "engine/context.h"
#include "engine/test_support.h"

namespace agentkv::engine::testing {

struct HybridOracleResult {
  std::vector<KvBlock> blocks;         // A's export (at-rest type)
  std::vector<KvBlock> reexport;       // B's export after the restore
  std::vector<float> roundtrip_logits; // A after its round trip, for `next`
  std::vector<float> restored_logits;  // B
  std::vector<float> cold_logits;      // C
  std::vector<int32_t> roundtrip_tokens, restored_tokens;
  GreedyRun cold_run, restored_run;    // with top-2 gaps, for the quality check
};

// REQUIRES: ctx has >= 3 empty slots of >= head.size() + n_greedy + 1 positions.
Result<HybridOracleResult> RunHybridOracle(Context& ctx, const std::vector<int32_t>& head, int32_t next,
                                           int n_greedy);

}  // namespace agentkv::engine::testing
