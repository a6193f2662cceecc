#include "prefix/prefix_match.h"

#include <algorithm>
#include <cassert>

namespace agentkv {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Run of leading [0, 0) tokens (BOS and other specials before the first text).
size_t LeadingSpecials(std::span<const TokenSpan> spans) {
  size_t n = 0;
  while (n < spans.size() && spans[n].begin == 0 && spans[n].end == 0) ++n;
  return n;
}

size_t ResumeOffset(std::span<const TokenSpan> spans, size_t n_keep) {
  return n_keep == 0 ? 0 : spans[n_keep - 1].end;
}

// In order up to the first span outside the text (e.g. the engine's
// "unaligned" sentinel), which the keep rule never passes.
[[maybe_unused]] bool SpansValid(std::span<const TokenSpan> spans, size_t text_bytes) {
  uint32_t prev_end = 0;
  for (const TokenSpan& s : spans) {
    if (s.end > text_bytes) return true;
    if (s.begin > s.end || s.begin < prev_end) return false;
    prev_end = s.end;
  }
  return true;
}

}  // namespace

const char* MatchTypeName(MatchType type) {
  switch (type) {
    case MatchType::kExact: return "exact";
    case MatchType::kExtend: return "extend";
    case MatchType::kDiverge: return "diverge";
    case MatchType::kMiss: return "miss";
  }
  return "unknown";
}

size_t CommonPrefixBytes(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t l = static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
  // Both strings share [0, l); l is a boundary only if neither continues a code
  // point there. A cut code point would make the remainder invalid UTF-8.
  while (l > 0 && ((l < a.size() && IsContinuationByte(a[l])) ||
                   (l < b.size() && IsContinuationByte(b[l])))) {
    --l;
  }
  return l;
}

PrefixMatch MatchPrefix(std::string_view cached_text, std::span<const TokenSpan> spans,
                        std::string_view prompt, const MatchOptions& options) {
  assert(SpansValid(spans, cached_text.size()));
  PrefixMatch m;
  if (cached_text.empty()) return m;  // kMiss: nothing to reuse

  const size_t l = CommonPrefixBytes(cached_text, prompt);
  m.common_bytes = l;
  if (l == cached_text.size()) {
    m.type = prompt.size() == l ? MatchType::kExact : MatchType::kExtend;
  } else if (static_cast<double>(l) >= options.min_diverge_ratio * static_cast<double>(cached_text.size())) {
    m.type = MatchType::kDiverge;
  } else {
    return m;  // kMiss, cold
  }

  const size_t n_lead = LeadingSpecials(spans);
  size_t n = n_lead;
  while (n < spans.size()) {
    const TokenSpan& s = spans[n];
    // Empty span: keep only if text P shares follows it. Text: whole span in [0, L).
    const bool keep = s.begin == s.end ? s.begin < l : s.end <= l;
    if (!keep) break;
    ++n;
  }
  // Feed at least one token so the engine produces logits: re-feed the tail.
  while (!prompt.empty() && n > n_lead && ResumeOffset(spans, n) >= prompt.size()) --n;

  if (m.type == MatchType::kDiverge && n == n_lead) {
    m.type = MatchType::kMiss;  // only BOS would survive: that is a cold start
    return m;
  }
  m.n_keep_tokens = n;
  return m;
}

size_t CommonTokenPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

}  // namespace agentkv
