#include "prefix/agent_lookup.h"

#include "prefix/prefix_match.h"

namespace agentkv {

std::optional<AgentCandidate> FindLongestPrefixAgent(std::span<const std::string_view> texts,
                                                     std::string_view prompt) {
  std::optional<AgentCandidate> best;
  for (size_t i = 0; i < texts.size(); ++i) {
    const size_t l = CommonPrefixBytes(texts[i], prompt);
    if (l == 0) continue;
    const bool better = !best || l > best->common_bytes ||
                        (l == best->common_bytes && texts[i].size() < texts[best->index].size());
    if (better) best = AgentCandidate{i, l};
  }
  return best;
}

}  // namespace agentkv
