#pragma once
// Helpers shared by the synthetic-byte layout tests (seq_state_test.cc,
// seq_state_hybrid_test.cc, sched/read_landing_test.cc).

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "engine/seq_state.h"
#include "store/kv_block.h"
#include "util/status.h"

namespace agentkv::engine::testing {

// Positions [lo, hi) in a seeded random order: cells out of position order.
inline std::vector<int32_t> Shuffled(int32_t lo, int32_t hi, unsigned seed) {
  std::vector<int32_t> v(hi - lo);
  std::iota(v.begin(), v.end(), lo);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

inline std::vector<const KvBlock*> Ptrs(const std::vector<KvBlock>& blocks) {
  std::vector<const KvBlock*> out;
  for (const auto& b : blocks) out.push_back(&b);
  return out;
}

// The state bytes a restore writes for positions [0, n_tokens) of `blocks`
// (StateBytesForBlocks + WriteBlocksState, as production calls them), in one
// vector: the expected value tests compare slots and landings against.
inline Result<std::vector<uint8_t>> StateOfBlocks(const std::vector<const KvBlock*>& blocks, const KvLayout& layout,
                                                 uint32_t n_tokens, uint32_t n_stream) {
  std::vector<uint8_t> out(StateBytesForBlocks(blocks, layout, n_tokens, n_stream));
  AGENTKV_RETURN_IF_ERROR(WriteBlocksState(blocks, layout, n_tokens, n_stream, out));
  return out;
}
inline Result<std::vector<uint8_t>> StateOfBlocks(const std::vector<const KvBlock*>& blocks, const StateShape& shape,
                                                 uint32_t n_tokens, uint32_t n_stream) {
  return StateOfBlocks(blocks, KvLayout::Same(shape), n_tokens, n_stream);
}

}  // namespace agentkv::engine::testing
