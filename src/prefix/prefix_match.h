#pragma once
// Character-level prefix matching (DESIGN §6, docs/prefix-matching.md).
//
// Pure functions, no I/O, no llama. "Character" means byte of UTF-8 text, but
// a match never ends inside a code point.
//
// Inputs: the agent's cached text C, the byte span of each cached token in C,
// and a new prompt P. Output: how many cached tokens to keep; the prefill
// resumes in P at the end of the last kept token's span.
//
// Token spans. Token i covers C[begin, end). Spans are in order
// (begin_i >= end_{i-1}); gaps are allowed. An empty span [x, x) is a token
// that produced no text (BOS, a generated EOS, ...):
//   - leading specials: the run of [0, 0) tokens before the first token with
//     text (typically BOS) is kept whenever anything is kept;
//   - any other empty-span token at x is kept only if x < L (strictly inside
//     the common prefix, i.e. text that P also has follows it). A trailing
//     EOS at x == len(C) is therefore dropped on EXTEND: P's text does not
//     contain it.
// A token with text is kept only if its whole span lies in [0, L). Only a
// contiguous run from token 0 is kept: the first token that fails the rule
// ends the run. A span that lies outside C (e.g. engine's kUnalignedSpan
// {0xFFFFFFFF, 0xFFFFFFFF} for tokens whose pieces do not reproduce the text)
// is never kept, so it ends the run too.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace agentkv {

enum class MatchType {
  kExact,    // P == C
  kExtend,   // P starts with C, P longer
  kDiverge,  // common prefix L < len(C), L >= min_diverge_ratio * len(C)
  kMiss,     // nothing reusable: prefill cold
};

const char* MatchTypeName(MatchType type);  // "exact", "extend", ...

// Byte span [begin, end) of one token in the cached text.
struct TokenSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
};

struct MatchOptions {
  // DIVERGE keeps tokens only if L >= ratio * len(C) (bytes); else MISS.
  double min_diverge_ratio = 0.5;
};

struct PrefixMatch {
  MatchType type = MatchType::kMiss;
  size_t common_bytes = 0;   // L: common prefix of C and P, on a code point boundary
  size_t n_keep_tokens = 0;  // keep cached tokens [0, n_keep_tokens)
  // True if no cached token is kept: prefill P whole, with the model's usual
  // leading specials (BOS). Otherwise prefill P from the resume point (end of
  // span n_keep_tokens - 1) WITHOUT specials (never a BOS mid-context).
  bool cold() const { return n_keep_tokens == 0; }
};

// Length of the common byte prefix of a and b, moved back so that it ends on a
// UTF-8 code point boundary of both (never between a lead byte and its
// continuation bytes). O(L).
size_t CommonPrefixBytes(std::string_view a, std::string_view b);

// Decides what to reuse of the cached tokens for prompt P.
//
// Rules (in order):
//   C empty                           -> kMiss (nothing to reuse).
//   P == C                            -> kExact.
//   P starts with C                   -> kExtend.
//   L >= ratio * len(C)               -> kDiverge, else kMiss.
//   Keep tokens per the span rules above; the resume point is the end of the
//   last kept token's span (0 if none).
//   At least one token to feed: if P is non-empty and the resume point is
//   len(P) (EXACT, or DIVERGE where P is a prefix of C), drop kept tokens
//   from the end (never the leading specials) until it is < len(P): the
//   last token is re-fed so the engine gets logits.
//   kDiverge with no text token kept (only leading specials or nothing)
//   becomes kMiss with n_keep_tokens = 0.
//   kMiss always has n_keep_tokens = 0.
//
// REQUIRES: spans in order up to the first one outside C (asserted in debug).
// O(L + number of tokens).
PrefixMatch MatchPrefix(std::string_view cached_text, std::span<const TokenSpan> spans,
                        std::string_view prompt, const MatchOptions& options = {});

// Number of leading equal token ids: what token-id prefix matching (vLLM,
// SGLang style) would reuse. For comparison in tests and benchmarks.
size_t CommonTokenPrefix(std::span<const int32_t> a, std::span<const int32_t> b);

}  // namespace agentkv
