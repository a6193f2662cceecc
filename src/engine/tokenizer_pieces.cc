// Tokenizer::TokenizeInPieces: a long text tokenized as pieces on several
// threads, cut at safe cuts (engine/tokenizer_cuts.h), and stitched. Piece i
// covers [start_i, end_i): start_0 = 0, start_i = the text after cut i - 1 (at
// the cut, or one byte after it where SentencePiece's dummy prefix stands for
// the space), end_i = cut i + 2 (the letter after the cut included, so the cut
// is safe inside the piece as well), the last piece runs to the end. From each
// piece but the last, the tokens before its cut are kept: by the safe-cut
// argument they are the full tokenization's (the argument TokenizeExtending
// relies on, applied to the piece as the "earlier prompt" of the text from
// start_i on), and the last piece is the full tokenization's tail. A start-up
// self-check (DetectCutRule) compares the stitching with the full
// tokenization at every safe cut of a probe text, as for TokenizeExtending.
#include "engine/tokenizer.h"
#include "engine/tokenizer_cuts.h"
#include "util/parallel.h"

namespace agentkv::engine {

std::optional<TokenizedText> Tokenizer::TokenizeAtCuts(std::string_view text, const std::vector<TextRange>& plain,
                                                       const std::vector<size_t>& cut_at, bool parallel) const {
  const size_t m = cut_at.size();
  auto start_of = [&](size_t i) -> size_t {
    if (i == 0) return 0;
    return cut_rule_ == CutRule::kDummyPrefixSpace ? cut_at[i - 1] + 1 : cut_at[i - 1];
  };
  auto end_of = [&](size_t i) { return i < m ? cut_at[i] + 2 : text.size(); };
  std::vector<TokenizedText> parts(m + 1);
  auto tokenize_piece = [&](size_t i) {
    const size_t start = start_of(i), end = end_of(i);
    parts[i] = Tokenize(text.substr(start, end - start), /*add_bos=*/i == 0, cuts::ClipRanges(plain, start, end));
  };
  // In parallel: a piece per thread of the caller's WorkerTeam (kept between
  // calls of this HTTP thread), the caller's own thread taking one.
  ParallelFor(m + 1, parallel ? static_cast<int>(m + 1) : 1, tokenize_piece);
  TokenizedText out;
  for (size_t i = 0; i <= m; ++i) {
    const TokenizedText& part = parts[i];
    const size_t start = start_of(i);
    size_t keep = part.tokens.size();
    if (i < m) {
      if (!part.aligned) return std::nullopt;  // every kept token must be aligned
      keep = cuts::TokenBoundaryAt(part.spans, cut_at[i] - start);
      if (keep == 0) return std::nullopt;  // no token boundary at the cut
    }
    cuts::AppendPiece(out, part, keep, start, i == 0 ? 0 : cut_at[i - 1]);
  }
  out.aligned = parts[m].aligned;
  return out;
}

TokenizedText Tokenizer::TokenizeInPieces(std::string_view text, const std::vector<TextRange>& plain, int max_pieces,
                                          size_t min_piece_bytes) const {
  min_piece_bytes = std::max<size_t>(min_piece_bytes, 16);
  if (cut_rule_ == CutRule::kNone || max_pieces < 2 || text.size() < 2 * min_piece_bytes) {
    return Tokenize(text, true, plain);
  }
  const size_t n = std::min<size_t>(static_cast<size_t>(max_pieces), text.size() / min_piece_bytes);
  std::vector<size_t> cut_at;
  for (size_t i = 1; i < n; ++i) {
    // The first safe cut at or after the piece's share, and after the last cut's piece got at least half a piece.
    const size_t from = std::max(text.size() * i / n, cut_at.empty() ? size_t{1} : cut_at.back() + min_piece_bytes / 2);
    const size_t to = std::min(text.size(), from + cuts::kMaxCutSearchBytes);
    for (size_t c = from; c < to; ++c) {
      if (cuts::IsSafeCut(text, plain, c)) {
        cut_at.push_back(c);
        break;
      }
    }
  }
  if (cut_at.empty()) return Tokenize(text, true, plain);
  auto out = TokenizeAtCuts(text, plain, cut_at, /*parallel=*/true);
  return out ? std::move(*out) : Tokenize(text, true, plain);
}

}  // namespace agentkv::engine
