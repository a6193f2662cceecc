#pragma once
// Safe cuts of a text for tokenization (internal to the tokenizer's .cc
// files): positions c with an ASCII letter at c - 1, a space at c and an
// ASCII letter at c + 1, all three inside one plain (client text) range.
// Tokens before a safe cut do not depend on the text after it, and the text
// from the cut on tokenizes as its own fragment (why: tokenizer_extend.cc and
// docs/engine.md "Incremental tokenization"). Used by TokenizeExtending (reuse
// an earlier prompt's tokens) and TokenizeInPieces (tokenize pieces at once).

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

#include "engine/tokenizer.h"

namespace agentkv::engine::cuts {

// How far from a wanted position a cut is searched for.
inline constexpr size_t kMaxCutSearchBytes = 4096;

inline bool IsAsciiLetter(char ch) {
  const char lower = static_cast<char>(ch | 0x20);
  return lower >= 'a' && lower <= 'z';
}

// Whether [begin, end) lies inside one of the sorted ranges.
inline bool InsideOneRange(const std::vector<TextRange>& ranges, size_t begin, size_t end) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                             [](size_t v, const TextRange& r) { return v < r.begin; });
  if (it == ranges.begin()) return false;
  --it;
  return it->begin <= begin && end <= it->end;
}

inline bool IsSafeCut(std::string_view text, const std::vector<TextRange>& plain, size_t c) {
  return c >= 1 && c + 1 < text.size() && IsAsciiLetter(text[c - 1]) && text[c] == ' ' &&
         IsAsciiLetter(text[c + 1]) && InsideOneRange(plain, c - 1, c + 2);
}

// The ranges intersected with [from, to), shifted to start at 0.
inline std::vector<TextRange> ClipRanges(const std::vector<TextRange>& ranges, size_t from, size_t to) {
  std::vector<TextRange> out;
  for (const TextRange& r : ranges) {
    const size_t b = std::max(r.begin, from), e = std::min(r.end, to);
    if (b < e) out.push_back({b - from, e - from});
  }
  return out;
}

// The index k of the first token starting at or after `cut`, when the tokens
// have a boundary exactly there (token k starts at cut, token k - 1 ends
// there, k > 0); 0 when they do not.
inline size_t TokenBoundaryAt(const std::vector<TokenSpan>& spans, size_t cut) {
  const auto it = std::lower_bound(spans.begin(), spans.end(), static_cast<uint32_t>(cut),
                                   [](const TokenSpan& s, uint32_t v) { return s.begin < v; });
  const size_t k = static_cast<size_t>(it - spans.begin());
  if (k == 0 || k >= spans.size() || spans[k].begin != cut || spans[k - 1].end != cut) return 0;
  return k;
}

// Appends the first n tokens of `part`, a tokenization of the text from byte
// `start` on, to `out` with their spans moved to the whole text's offsets.
// When the part began one byte after a cut (SentencePiece's dummy prefix
// stands for the space at `cut`), its first token's span begins at the cut.
inline void AppendPiece(TokenizedText& out, const TokenizedText& part, size_t n, size_t start, size_t cut) {
  const size_t first = out.tokens.size();
  out.tokens.insert(out.tokens.end(), part.tokens.begin(), part.tokens.begin() + static_cast<ptrdiff_t>(n));
  for (size_t k = 0; k < n; ++k) {
    TokenSpan s = part.spans[k];
    if (s.begin != kUnalignedSpan) {
      s.begin += static_cast<uint32_t>(start);
      s.end += static_cast<uint32_t>(start);
    }
    out.spans.push_back(s);
  }
  if (start != cut && first < out.spans.size() && out.spans[first].begin != kUnalignedSpan) {
    out.spans[first].begin = static_cast<uint32_t>(cut);
  }
}

}  // namespace agentkv::engine::cuts
