#pragma once
// UTF-8 repair and reassembly for generated text.
//
// A backend emits raw bytes token by token; a token may end inside a code
// point, and a model can emit invalid bytes. JSON needs valid UTF-8, and the
// streamed deltas must concatenate to exactly the non-streamed text. Both
// paths therefore go through Utf8Splitter, which only cuts where the decoder
// is between characters, so Sanitize(a + b) == Sanitize(a) + Sanitize(b) for
// every cut it makes.

#include <string>
#include <string_view>

namespace agentkv::api {

// Returns `bytes` with every maximal invalid subpart (Unicode §3.9, "U+FFFD
// substitution of maximal subparts") replaced by U+FFFD. Valid input is
// returned unchanged.
std::string SanitizeUtf8(std::string_view bytes);

// Length of the longest prefix of `bytes` after which a UTF-8 decoder is
// between characters (no incomplete but still possibly valid sequence).
size_t Utf8CompletePrefix(std::string_view bytes);

// Turns a byte stream into valid UTF-8 pieces, holding back an incomplete
// trailing sequence (at most 3 bytes) until the next Push or Flush.
// Not thread-safe; one per response.
class Utf8Splitter {
 public:
  // Appends bytes; returns the text now complete (may be empty).
  std::string Push(std::string_view bytes);
  // Returns whatever is held back (an incomplete sequence -> U+FFFD).
  std::string Flush();

 private:
  std::string pending_;
};

}  // namespace agentkv::api
