// Tokenizer::TokenizeExtending: tokenizing only what a prompt adds to an
// earlier one. Why the result equals the full tokenization: docs/engine.md
// "Incremental tokenization". In short, a safe cut c is a position with an
// ASCII letter at c - 1, a space at c and an ASCII letter at c + 1, all three
// inside one plain (client text) range, so
//   - no special token is matched across c and no strip rule crosses it
//     (specials are matched only outside plain ranges; a letter stops strips);
//   - BPE: every pre-tokenizer llama.cpp ships ends a letter run at the space
//     and starts the next word there (" ?\p{L}+" and the like), and BPE merges
//     stay inside pre-tokenized words; the matches after c do not depend on
//     the text before it (no look-behind);
//   - SentencePiece: a merge across c would need a vocabulary piece with a
//     non-space character followed by the space mark U+2581; DetectCutRule
//     checks that the vocabulary has none, so the symbols left and right of c
//     are merged independently.
// A self-check on a probe text at start-up backs the rule for each loaded
// vocabulary (here and for TokenizeInPieces' stitching at the same cuts); any
// difference turns incremental and piecewise tokenization off.
#include <algorithm>

#include "engine/tokenizer.h"
#include "engine/tokenizer_cuts.h"
#include "llama.h"

namespace agentkv::engine {
namespace {

using cuts::IsSafeCut;
using cuts::kMaxCutSearchBytes;

// Whether the ranges, clipped to [0, limit), are the same in a and b.
bool SameRangesBefore(const std::vector<TextRange>& a, const std::vector<TextRange>& b, size_t limit) {
  size_t i = 0;
  for (; i < a.size() && a[i].begin < limit; ++i) {
    if (i >= b.size() || b[i].begin != a[i].begin || std::min(a[i].end, limit) != std::min(b[i].end, limit)) {
      return false;
    }
  }
  return i == b.size() || b[i].begin >= limit;
}

bool SameTokenization(const TokenizedText& a, const TokenizedText& b) {
  if (a.tokens != b.tokens || a.aligned != b.aligned || a.spans.size() != b.spans.size()) return false;
  for (size_t i = 0; i < a.spans.size(); ++i) {
    if (a.spans[i].begin != b.spans[i].begin || a.spans[i].end != b.spans[i].end) return false;
  }
  return true;
}

// English and a little of everything else a prompt holds: punctuation,
// digits, code, several spaces, newlines, non-ASCII letters.
constexpr std::string_view kProbeText =
    "The quick brown fox jumps over the lazy dog. She said: \"Hello there, Bob!\" and walked away.\n"
    "In 1984 there were 12,345 people living in the old town of Zurich, according to the census records.\n"
    "def add(a, b):\n    return a + b  # adds two numbers\nIt's what they'd call a well known fact, isn't it?\n"
    "Caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 and the \xE6\x97\xA5\xE6\x9C\xAC words mixed in a sentence here.\n"
    "User asked about the Weather Report for Monday and Tuesday  with two spaces between words.";

}  // namespace

Tokenizer::CutRule Tokenizer::DetectCutRule() {
  // An appended EOS would be missing after the reused prefix's cut.
  if (llama_vocab_get_add_eos(vocab_)) return CutRule::kNone;
  const enum llama_vocab_type type = llama_vocab_type(vocab_);
  if (type != LLAMA_VOCAB_TYPE_SPM && type != LLAMA_VOCAB_TYPE_BPE) return CutRule::kNone;
  if (type == LLAMA_VOCAB_TYPE_SPM) {
    // No piece may hold the space mark right after another character.
    constexpr std::string_view kMark = "\xE2\x96\x81";  // U+2581
    const int32_t n_vocab = llama_vocab_n_tokens(vocab_);
    for (int32_t t = 0; t < n_vocab; ++t) {
      const char* text = llama_vocab_get_text(vocab_, t);
      if (text == nullptr) continue;
      const std::string_view piece(text);
      for (size_t at = piece.find(kMark, 1); at != std::string_view::npos; at = piece.find(kMark, at + 1)) {
        if (at < kMark.size() || piece.substr(at - kMark.size(), kMark.size()) != kMark) return CutRule::kNone;
      }
    }
  }
  // Does the tokenizer put a space before every fragment (SentencePiece's
  // dummy prefix)? Then the suffix starts after the space it stands for.
  const std::vector<int32_t> a = RawTokens("a", false, false);
  const bool dummy_prefix = !a.empty() && Piece(a.front()).starts_with(' ');
  const CutRule rule = dummy_prefix ? CutRule::kDummyPrefixSpace : CutRule::kSpace;

  // Self-check: every safe cut of the probe text gives the full tokenization.
  cut_rule_ = rule;
  const std::vector<TextRange> all{{0, kProbeText.size()}};
  const TokenizedText full = Tokenize(kProbeText, true, all);
  bool ok = true;
  for (size_t c = 1; ok && c + 1 < kProbeText.size(); ++c) {
    if (!IsSafeCut(kProbeText, all, c)) continue;
    PromptTokens prev;
    prev.text = std::string(kProbeText.substr(0, c + 2)) + "qx";  // differs right after the cut
    prev.plain = {{0, prev.text.size()}};
    prev.tokenized = Tokenize(prev.text, true, prev.plain);
    size_t reused = 0;
    ok = SameTokenization(TokenizeExtending(prev, kProbeText, all, &reused), full) && reused > 0;
    // The same cut as a boundary between two pieces (TokenizeInPieces).
    const auto pieces = TokenizeAtCuts(kProbeText, all, {c}, /*parallel=*/false);
    ok = ok && pieces && SameTokenization(*pieces, full);
  }
  cut_rule_ = CutRule::kNone;
  return ok ? rule : CutRule::kNone;
}

TokenizedText Tokenizer::TokenizeExtending(const PromptTokens& prev, std::string_view text,
                                           const std::vector<TextRange>& plain, size_t* reused) const {
  if (reused != nullptr) *reused = 0;
  if (cut_rule_ == CutRule::kNone) return Tokenize(text, true, plain);
  const std::string_view before(prev.text);
  const size_t common =
      static_cast<size_t>(std::mismatch(before.begin(), before.end(), text.begin(), text.end()).first - before.begin());
  const std::vector<TokenSpan>& spans = prev.tokenized.spans;
  // The rule reads c - 1 .. c + 1: all of it in the shared prefix.
  const size_t lowest = common > kMaxCutSearchBytes ? common - kMaxCutSearchBytes : 1;
  for (size_t c = common >= 2 ? common - 2 : 0; c >= lowest; --c) {
    if (!IsSafeCut(text, plain, c) || !IsSafeCut(before, prev.plain, c) ||
        !SameRangesBefore(prev.plain, plain, c + 2)) {
      continue;
    }
    // prev's first token at or after c: it starts exactly at c (the cut is a
    // token boundary there), and every token before it is aligned.
    const size_t k = cuts::TokenBoundaryAt(spans, c);
    if (k == 0) continue;

    const size_t from = cut_rule_ == CutRule::kDummyPrefixSpace ? c + 1 : c;
    TokenizedText tail = Tokenize(text.substr(from), /*add_bos=*/false, cuts::ClipRanges(plain, from, text.size()));
    TokenizedText out;
    out.tokens.reserve(k + tail.tokens.size());
    out.spans.reserve(k + tail.spans.size());
    out.tokens.assign(prev.tokenized.tokens.begin(), prev.tokenized.tokens.begin() + static_cast<ptrdiff_t>(k));
    out.spans.assign(spans.begin(), spans.begin() + static_cast<ptrdiff_t>(k));
    cuts::AppendPiece(out, tail, tail.tokens.size(), from, c);
    out.aligned = tail.aligned;
    if (reused != nullptr) *reused = k;
    return out;
  }
  return Tokenize(text, true, plain);
}

}  // namespace agentkv::engine
