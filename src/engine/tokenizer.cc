#include "engine/tokenizer.h"

#include <cctype>

#include "llama.h"

namespace agentkv::engine {

Tokenizer::Tokenizer(const Model& model) : model_(model), vocab_(model.vocab()) {
  const char* tmpl = llama_model_chat_template(model.raw(), nullptr);
  if (tmpl != nullptr) {
    // Keep the template only if llama.cpp's matcher can apply it.
    llama_chat_message probe{"user", "x"};
    if (llama_chat_apply_template(tmpl, &probe, 1, true, nullptr, 0) >= 0) template_ = tmpl;
  }
}

int32_t Tokenizer::Bos() const {
  const llama_token bos = llama_vocab_bos(vocab_);
  return bos == LLAMA_TOKEN_NULL ? -1 : bos;
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

TokenizedText Tokenizer::Tokenize(std::string_view text, bool add_bos) const {
  TokenizedText out;
  bool add_special = add_bos && AddsBos();
  if (add_special && text.starts_with(Piece(Bos()))) add_special = false;  // already there
  std::vector<llama_token> toks(text.size() + 8);
  int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), toks.data(),
                             static_cast<int32_t>(toks.size()), add_special, /*parse_special=*/true);
  if (n < 0) {
    toks.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), toks.data(),
                       static_cast<int32_t>(toks.size()), add_special, true);
  }
  toks.resize(n > 0 ? static_cast<size_t>(n) : 0);
  out.tokens.assign(toks.begin(), toks.end());

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

std::string Tokenizer::ApplyChatTemplate(const std::vector<ChatMessage>& messages) const {
  if (!template_.empty()) {
    std::vector<llama_chat_message> msgs;
    msgs.reserve(messages.size());
    size_t total = 0;
    for (const auto& m : messages) {
      msgs.push_back({m.role.c_str(), m.content.c_str()});
      total += m.role.size() + m.content.size();
    }
    std::string buf(total * 2 + 512, '\0');
    int32_t n = llama_chat_apply_template(template_.c_str(), msgs.data(), msgs.size(), true, buf.data(),
                                          static_cast<int32_t>(buf.size()));
    if (n > static_cast<int32_t>(buf.size())) {
      buf.resize(static_cast<size_t>(n));
      n = llama_chat_apply_template(template_.c_str(), msgs.data(), msgs.size(), true, buf.data(),
                                    static_cast<int32_t>(buf.size()));
    }
    if (n >= 0) {
      buf.resize(static_cast<size_t>(n));
      return buf;
    }
  }
  // Fallback: "role: content\n\n" ..., then "assistant:". No space is added
  // before content that starts with whitespace, so a reply generated after
  // "assistant:" (" Hello") renders back identically on the next turn.
  std::string out;
  for (const auto& m : messages) {
    out += m.role + ":";
    if (!m.content.empty() && !std::isspace(static_cast<unsigned char>(m.content[0]))) out += " ";
    out += m.content + "\n\n";
  }
  out += "assistant:";
  return out;
}

}  // namespace agentkv::engine
