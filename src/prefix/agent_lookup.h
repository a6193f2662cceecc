#pragma once
// Implicit agent identity (issue #4): among the agents of one namespace, find
// the one whose cached text shares the longest character prefix with a new
// prompt. The caller then runs MatchPrefix on that agent to decide between
// continuing it (EXACT/EXTEND), forking it (DIVERGE) or starting a new agent
// (MISS). See docs/prefix-matching.md.

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace agentkv {

struct AgentCandidate {
  size_t index = 0;         // position in the input list
  size_t common_bytes = 0;  // L = CommonPrefixBytes(texts[index], prompt), > 0
};

// Returns the candidate with the largest L. Ties: the one whose text is
// shortest (so an agent that P extends wins over one P diverges from), then the
// lowest index (callers may order by recency). Returns nullopt if no text
// shares at least one code point with P (L == 0 everywhere) or texts is empty.
//
// The caller must only pass texts of ONE namespace.
// Complexity: linear scan, O(sum_i min(len(texts[i]), len(P))) byte compares;
// fine for hundreds of agents. A byte trie over the namespace's texts would
// make it O(len(P)) if namespaces grow to many thousands of long contexts.
std::optional<AgentCandidate> FindLongestPrefixAgent(std::span<const std::string_view> texts,
                                                     std::string_view prompt);

}  // namespace agentkv
