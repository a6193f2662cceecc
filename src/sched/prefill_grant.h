#pragma once
// GrantPrefill: how the prefill budget of one iteration (DESIGN §7) is
// shared among the turns still prefilling their prompts.
//
// Shortest remaining prompt first, so a short prompt that arrives during a
// long prefill gets its first token after one iteration instead of after the
// whole long prefill; the oldest prefill is first guaranteed a share (a
// quarter of the budget, at least one token), so it cannot starve.
//
// Pure function; thread-compatible.

#include <cstddef>
#include <vector>

namespace agentkv::sched {

// `remaining`: the tokens each prefilling turn has left, in admission order
// (oldest first). Returns the tokens granted to each, in the same order:
// grant[i] <= remaining[i], and their sum <= max(budget, 0).
std::vector<size_t> GrantPrefill(const std::vector<size_t>& remaining, int budget);

}  // namespace agentkv::sched
