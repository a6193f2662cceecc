#pragma once
// Tokenizer: text <-> tokens with exact byte spans. Chat templates:
// engine/chat_format.h.
//
// Thread safety: immutable after construction; safe from any thread
// (llama.cpp's vocab functions are read-only).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model.h"
#include "util/status.h"

namespace agentkv::engine {

// Byte range [begin, end) of a token's text in the source string. Special
// tokens that are not in the text (an added BOS) have begin == end.
struct TokenSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
};

inline constexpr uint32_t kUnalignedSpan = 0xFFFFFFFFu;

struct TokenizedText {
  std::vector<int32_t> tokens;
  std::vector<TokenSpan> spans;  // one per token
  // True when the tokens' pieces reproduce the text exactly. When false, the
  // tokens after the first misaligned one get {kUnalignedSpan, kUnalignedSpan}:
  // they lie in no character prefix, so prefix matching never reuses them.
  bool aligned = true;
};

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
};

// A prompt as rendered for the model, with the ranges that hold client text
// (message contents, a raw completion prompt); made by ChatFormat::Render. Special tokens are parsed only
// outside `plain`: the template's own "<|im_start|>" is one token, a client's
// "<|im_start|>" (or "<s>", "</s>") is text, so no role or turn can be forged.
// Ranges are sorted, disjoint and inside `text`.
struct RenderedPrompt {
  std::string text;
  std::vector<TextRange> plain;
};

// A prompt's tokenization and what it was computed from, the input of
// Tokenizer::TokenizeExtending: tokenized == Tokenize(text, true, plain).
struct PromptTokens {
  std::string text;
  std::vector<TextRange> plain;
  TokenizedText tokenized;
};

class Tokenizer {
 public:
  explicit Tokenizer(const Model& model);

  // Tokenizes `text` (special tokens written as text, e.g. "<|eot_id|>", are
  // parsed as specials). add_bos adds the model's BOS when the model wants one
  // and the text does not already start with it.
  TokenizedText Tokenize(std::string_view text, bool add_bos) const;

  // The same, but inside the `plain` ranges (sorted, disjoint) special-token
  // text is ordinary text: specials are matched only in the rest of `text`,
  // with llama.cpp's precedence (longest first) and strip rules, and the text
  // between them is tokenized without special parsing. Without special text
  // in `plain`, the result equals Tokenize(text, add_bos). A BOS is added as
  // by Tokenize, unless `text` starts with the BOS text outside `plain`.
  TokenizedText Tokenize(std::string_view text, bool add_bos, const std::vector<TextRange>& plain) const;

  // Tokenize(text, /*add_bos=*/true, plain), computed from `prev` (an earlier
  // prompt that shares a prefix with this one, e.g. the agent's previous
  // turn): prev's tokens before a safe cut are reused and only the text after
  // the cut is tokenized. The result equals the full tokenization (the cut
  // rule and why it holds: docs/engine.md "Incremental tokenization"); with
  // no safe cut in the shared prefix, or a vocabulary without a proven rule
  // (tokenizes_incrementally() false), it is the full tokenization.
  // *reused (optional) receives the number of tokens taken from prev.
  TokenizedText TokenizeExtending(const PromptTokens& prev, std::string_view text,
                                  const std::vector<TextRange>& plain, size_t* reused = nullptr) const;
  bool tokenizes_incrementally() const { return cut_rule_ != CutRule::kNone; }

  // Tokenize(text, /*add_bos=*/true, plain), computed as up to max_pieces
  // pieces of at least min_piece_bytes on as many threads (the caller's one of
  // them), cut at safe cuts (tokenizer_pieces.cc) and stitched: the result
  // equals the full tokenization. The full tokenization on one thread when the
  // text is shorter than two pieces, when no safe cut is found, or for a
  // vocabulary without a proven rule (tokenizes_incrementally() false).
  TokenizedText TokenizeInPieces(std::string_view text, const std::vector<TextRange>& plain, int max_pieces,
                                 size_t min_piece_bytes = kMinTokenizePieceBytes) const;
  // ~500 tokens of English: a piece's tokenization takes milliseconds on a
  // laptop core, against ~50 us to start a thread.
  static constexpr size_t kMinTokenizePieceBytes = 2048;

  // An upper bound on the bytes of text one token covers (the longest piece
  // in the vocabulary): a text of more than n * MaxTokenBytes() bytes has
  // more than n tokens, so over-long prompts can be refused before
  // tokenizing them.
  size_t MaxTokenBytes() const { return max_token_bytes_; }

  // The text a token contributes (specials rendered as their text).
  std::string Piece(int32_t token) const;
  std::string Detokenize(const std::vector<int32_t>& tokens) const;

  bool IsEndOfGeneration(int32_t token) const;  // EOS, EOT, ...
  // True for the kinds of token that special-token text parses into outside
  // `plain` ranges (control, user-defined, unknown; BOS and the template's
  // turn markers among them): what a prompt's plain/special ranges are made of.
  bool IsSpecial(int32_t token) const {
    return token >= 0 && static_cast<size_t>(token) < is_special_.size() && is_special_[token] != 0;
  }
  int32_t Bos() const;                          // -1 when the model has none
  int32_t Eos() const;                          // -1 when the model has none
  bool AddsBos() const;

  // A raw completion prompt: all of it plain.
  static RenderedPrompt RenderPlain(std::string text);

 private:
  const Model& model_;
  const llama_vocab* vocab_;
  std::vector<int32_t> RawTokens(std::string_view text, bool add_special, bool parse_special) const;
  TokenizedText Align(std::string_view text, std::vector<int32_t> tokens, bool bos_added) const;

  // How TokenizeExtending cuts (tokenizer_extend.cc). kSpace: at a safe cut c
  // the text from c on is tokenized as its own fragment. kDummyPrefixSpace:
  // from c + 1, the space at c being the one SentencePiece puts before every
  // fragment. kNone: never (always the full tokenization).
  enum class CutRule { kNone, kSpace, kDummyPrefixSpace };
  CutRule cut_rule_ = CutRule::kNone;
  CutRule DetectCutRule();
  // The stitching of TokenizeInPieces at the given safe cuts (increasing);
  // nullopt when a piece has no token boundary at its cut (then the caller
  // tokenizes in full). parallel: the pieces on threads.
  std::optional<TokenizedText> TokenizeAtCuts(std::string_view text, const std::vector<TextRange>& plain,
                                               const std::vector<size_t>& cut_at, bool parallel) const;
  // Special tokens (control, user-defined, unknown) by text, longest first:
  // llama.cpp's own matching order.
  struct Special {
    std::string text;
    int32_t token = 0;
    bool lstrip = false;
    bool rstrip = false;
  };
  std::vector<Special> specials_;
  std::vector<uint8_t> is_special_;  // by token id
  size_t max_token_bytes_ = 1;
};

}  // namespace agentkv::engine
