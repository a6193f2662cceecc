#include "sched/side_request.h"

#include <algorithm>
#include <tuple>

#include "util/hash.h"
#include "util/names.h"

namespace agentkv::sched {
namespace {


size_t CommonPrefix(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<ptrdiff_t>(n), b.begin()).first -
                             a.begin());
}

}  // namespace

const char* SideKindName(SideKind kind) {
  switch (kind) {
    case SideKind::kMain: return "main";
    case SideKind::kOtherHead: return "other_head";
    case SideKind::kProbe: return "probe";
  }
  return "main";
}

SideDecision ClassifyRequest(const SideInputs& in) {
  SideDecision d;
  if (in.cached_text.empty()) {
    // A probe first (Claude Code probes before the first turn) must not
    // become the conversation the real first turn is then a side request of.
    if (in.max_tokens <= 1) d.kind = SideKind::kProbe;
    return d;
  }
  d.shared_bytes = CommonPrefix(in.cached_text, in.prompt);
  if (d.shared_bytes == in.cached_text.size()) return d;  // EXACT / EXTEND: it continues the conversation
  if (d.shared_bytes < std::max(in.prompt_head_bytes, in.cached_head_bytes)) {
    // The larger head keeps the main role (a title request taken first gives it up).
    if (in.max_tokens > 1 && in.prompt_head_bytes > in.cached_text.size()) {
      d.takes_over = true;
      return d;
    }
    d.kind = SideKind::kOtherHead;
  } else if (in.max_tokens <= 1) {
    d.kind = SideKind::kProbe;
  } else {
    return d;  // same head, other messages: compaction or an edit replaces the conversation
  }
  // A prompt wholly inside the conversation (a probe re-asking an earlier
  // prompt) is all cached: worth the fork however short.
  d.fork_from_main = d.shared_bytes >= kMinForkBytes || d.shared_bytes == in.prompt.size();
  return d;
}

std::string SideAgentId(std::string_view main_id, std::string_view head) {
  const std::string head_hash = Hex64(Xxh3_64(head));
  std::string id = std::string(main_id) + "-side-" + head_hash;
  if (id.size() <= kMaxNameBytes) return id;
  return "side-" + Hex64(Xxh3_64(main_id)) + "-" + head_hash;
}

size_t HeadBytes(const engine::ChatFormat& format, const engine::ChatRequest& request, std::string_view rendered) {
  engine::ChatRequest head;
  head.tools = request.tools;
  head.tool_choice = request.tool_choice;
  head.parallel_tool_calls = request.parallel_tool_calls;
  head.reasoning_format = request.reasoning_format;
  head.enable_thinking = request.enable_thinking;
  size_t i = 0;
  while (i < request.messages.size() && request.messages[i].role == "system") head.messages.push_back(request.messages[i++]);
  if (i == request.messages.size()) return 0;
  const std::string& first = request.messages[i].content;
  engine::ChatMessage sentinel;
  sentinel.role = "user";
  sentinel.content = !first.empty() && first[0] == 'A' ? "B" : "A";
  head.messages.push_back(std::move(sentinel));
  Result<engine::ChatPrompt> alt = format.Render(head);
  if (!alt.ok()) return 0;
  return CommonPrefix(rendered, alt->rendered.text);
}

size_t PickSlotVictim(const std::vector<VictimCandidate>& candidates) {
  size_t best = std::string::npos;
  // Lower is evicted first: unprotected before protected, side before main, older before newer.
  auto rank = [](const VictimCandidate& c) { return std::make_tuple(c.protect, !c.side, c.last_use_ms); };
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].busy) continue;
    if (best == std::string::npos || rank(candidates[i]) < rank(candidates[best])) best = i;
  }
  return best;
}

}  // namespace agentkv::sched
