#pragma once
// Helpers shared by the synthetic-byte layout tests (seq_state_test.cc,
// seq_state_hybrid_test.cc).

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "store/kv_block.h"

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

}  // namespace agentkv::engine::testing
