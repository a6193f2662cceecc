#include "engine/tokenizer.h"

#include <algorithm>
#include <cctype>

#include "llama.h"

namespace agentkv::engine {

Tokenizer::Tokenizer(const Model& model) : model_(model), vocab_(model.vocab()) {
  const int32_t n_vocab = llama_vocab_n_tokens(vocab_);
  is_special_.assign(static_cast<size_t>(std::max(n_vocab, 0)), 0);
  for (int32_t t = 0; t < n_vocab; ++t) {
    max_token_bytes_ = std::max(max_token_bytes_, Piece(t).size());
    const int attr = llama_vocab_get_attr(vocab_, t);
    if ((attr & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED | LLAMA_TOKEN_ATTR_UNKNOWN)) == 0) continue;
    is_special_[static_cast<size_t>(t)] = 1;
    const char* text = llama_vocab_get_text(vocab_, t);
    if (text == nullptr || *text == '\0') continue;
    specials_.push_back({text, t, (attr & LLAMA_TOKEN_ATTR_LSTRIP) != 0, (attr & LLAMA_TOKEN_ATTR_RSTRIP) != 0});
  }
  std::stable_sort(specials_.begin(), specials_.end(),
                   [](const Special& a, const Special& b) { return a.text.size() > b.text.size(); });
  cut_rule_ = DetectCutRule();
}

int32_t Tokenizer::Bos() const {
  const llama_token bos = llama_vocab_bos(vocab_);
  return bos == LLAMA_TOKEN_NULL ? -1 : bos;
}

int32_t Tokenizer::Eos() const {
  const llama_token eos = llama_vocab_eos(vocab_);
  return eos == LLAMA_TOKEN_NULL ? -1 : eos;
}

bool Tokenizer::AddsBos() const { return llama_vocab_get_add_bos(vocab_) && Bos() >= 0; }

bool Tokenizer::IsEndOfGeneration(int32_t token) const { return llama_vocab_is_eog(vocab_, token); }

std::string Tokenizer::Piece(int32_t token) const {
  char buf[256];
  int32_t n = llama_token_to_piece(vocab_, token, buf, sizeof buf, 0, /*special=*/true);
  if (n >= 0) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(-n), '\0');
  n = llama_token_to_piece(vocab_, token, big.data(), static_cast<int32_t>(big.size()), 0, true);
  big.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return big;
}

std::string Tokenizer::Detokenize(const std::vector<int32_t>& tokens) const {
  std::string out;
  for (int32_t t : tokens) out += Piece(t);
  return out;
}

std::vector<int32_t> Tokenizer::RawTokens(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<llama_token> toks(text.size() + 8);
  int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), toks.data(),
                             static_cast<int32_t>(toks.size()), add_special, parse_special);
  if (n < 0) {
    toks.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), toks.data(),
                       static_cast<int32_t>(toks.size()), add_special, parse_special);
  }
  toks.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return std::vector<int32_t>(toks.begin(), toks.end());
}

TokenizedText Tokenizer::Tokenize(std::string_view text, bool add_bos) const {
  bool add_special = add_bos && AddsBos();
  if (add_special && text.starts_with(Piece(Bos()))) add_special = false;  // already there
  return Align(text, RawTokens(text, add_special, /*parse_special=*/true), add_special);
}

TokenizedText Tokenizer::Tokenize(std::string_view text, bool add_bos, const std::vector<TextRange>& plain) const {
  if (plain.empty()) return Tokenize(text, add_bos);
  // Where specials may be matched: the complement of `plain`.
  std::vector<TextRange> open;
  size_t cursor = 0;
  for (const TextRange& r : plain) {
    if (r.begin > cursor) open.push_back({cursor, std::min(r.begin, text.size())});
    cursor = std::max(cursor, r.end);
  }
  if (cursor < text.size()) open.push_back({cursor, text.size()});
  // llama.cpp's partition: each special in turn (longest first) splits the
  // remaining open ranges at its occurrences.
  struct Match {
    size_t pos;
    const Special* special;
  };
  std::vector<Match> matches;
  for (const Special& sp : specials_) {
    std::vector<TextRange> next;
    for (const TextRange& r : open) {
      const std::string_view area = text.substr(0, r.end);
      size_t at = r.begin;
      for (size_t m; (m = area.find(sp.text, at)) != std::string_view::npos; at = m + sp.text.size()) {
        if (m > at) next.push_back({at, m});
        matches.push_back({m, &sp});
      }
      if (at < r.end) next.push_back({at, r.end});
    }
    open.swap(next);
    if (open.empty()) break;
  }
  std::sort(matches.begin(), matches.end(), [](const Match& a, const Match& b) { return a.pos < b.pos; });

  bool add_special = add_bos && AddsBos();
  if (add_special && !matches.empty() && matches[0].pos == 0 && matches[0].special->token == Bos()) {
    add_special = false;  // the template wrote the BOS itself
  }
  std::vector<int32_t> tokens;
  if (add_special) tokens.push_back(Bos());
  auto raw = [&](size_t begin, size_t end) {
    if (end <= begin) return;
    std::vector<int32_t> t = RawTokens(text.substr(begin, end - begin), false, /*parse_special=*/false);
    tokens.insert(tokens.end(), t.begin(), t.end());
  };
  cursor = 0;
  for (size_t i = 0; i < matches.size(); ++i) {
    const Match& m = matches[i];
    size_t end = m.pos;
    if (m.special->lstrip) {
      while (end > cursor && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
    }
    raw(cursor, end);
    tokens.push_back(m.special->token);
    cursor = m.pos + m.special->text.size();
    if (m.special->rstrip) {
      const size_t limit = i + 1 < matches.size() ? matches[i + 1].pos : text.size();
      while (cursor < limit && std::isspace(static_cast<unsigned char>(text[cursor]))) ++cursor;
    }
  }
  raw(cursor, text.size());
  if (add_special && llama_vocab_get_add_eos(vocab_)) tokens.push_back(llama_vocab_eos(vocab_));
  return Align(text, std::move(tokens), add_special);
}

TokenizedText Tokenizer::Align(std::string_view text, std::vector<int32_t> tokens, bool add_special) const {
  TokenizedText out;
  out.tokens = std::move(tokens);

  // Align each token's piece with the text. SentencePiece vocabularies add a
  // dummy space before a text fragment that follows a special token (or the
  // start); that space is not in the text and is skipped.
  const bool space_prefix = llama_vocab_type(vocab_) == LLAMA_VOCAB_TYPE_SPM;
  size_t cursor = 0;
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    const std::string piece = Piece(out.tokens[i]);
    const auto c32 = static_cast<uint32_t>(cursor);
    if (!out.aligned) {
      out.spans.push_back({kUnalignedSpan, kUnalignedSpan});
    } else if (text.compare(cursor, piece.size(), piece) == 0 && !piece.empty()) {
      out.spans.push_back({c32, static_cast<uint32_t>(cursor + piece.size())});
      cursor += piece.size();
    } else if (i == 0 && add_special && out.tokens[i] == Bos()) {
      out.spans.push_back({c32, c32});  // added BOS, not in the text
    } else if (space_prefix && piece.size() > 1 && piece[0] == ' ' &&
               text.compare(cursor, piece.size() - 1, std::string_view(piece).substr(1)) == 0) {
      out.spans.push_back({c32, static_cast<uint32_t>(cursor + piece.size() - 1)});
      cursor += piece.size() - 1;
    } else if (space_prefix && piece == " " && (cursor >= text.size() || text[cursor] != ' ')) {
      out.spans.push_back({c32, c32});  // a lone dummy-prefix space
    } else if (piece.empty()) {
      out.spans.push_back({c32, c32});
    } else {
      out.aligned = false;
      out.spans.push_back({kUnalignedSpan, kUnalignedSpan});
    }
  }
  if (cursor != text.size()) out.aligned = false;
  return out;
}

RenderedPrompt Tokenizer::RenderPlain(std::string text) {
  RenderedPrompt out;
  out.text = std::move(text);
  if (!out.text.empty()) out.plain = {{0, out.text.size()}};
  return out;
}

}  // namespace agentkv::engine
