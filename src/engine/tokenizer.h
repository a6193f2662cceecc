#pragma once
// Tokenizer: text <-> tokens with exact byte spans, and chat templates.
//
// Thread safety: immutable after construction; safe from any thread
// (llama.cpp's vocab functions are read-only).

#include <cstdint>
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

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

class Tokenizer {
 public:
  explicit Tokenizer(const Model& model);

  // Tokenizes `text` (special tokens written as text, e.g. "<|eot_id|>", are
  // parsed as specials). add_bos adds the model's BOS when the model wants one
  // and the text does not already start with it.
  TokenizedText Tokenize(std::string_view text, bool add_bos) const;

  // The text a token contributes (specials rendered as their text).
  std::string Piece(int32_t token) const;
  std::string Detokenize(const std::vector<int32_t>& tokens) const;

  bool IsEndOfGeneration(int32_t token) const;  // EOS, EOT, ...
  int32_t Bos() const;                          // -1 when the model has none
  bool AddsBos() const;

  // Renders messages with the GGUF's chat template (llama.cpp's built-in
  // template matcher) and appends the assistant prefix. Models without a
  // template, or with one llama.cpp cannot apply, use the fallback:
  //   "<role>: <content>\n\n" per message, then "assistant:".
  // Result is deterministic, and a conversation's rendering for n messages is
  // a prefix of its rendering for n+1 (so turns EXTEND the cache) for every
  // template that renders messages independently (all common ones).
  std::string ApplyChatTemplate(const std::vector<ChatMessage>& messages) const;
  bool uses_fallback_template() const { return template_.empty(); }

 private:
  const Model& model_;
  const llama_vocab* vocab_;
  std::string template_;  // empty: fallback
};

}  // namespace agentkv::engine
