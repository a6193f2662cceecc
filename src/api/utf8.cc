#include "api/utf8.h"

#include <cstdint>

namespace agentkv::api {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Bytes a lead byte announces (including itself), 0 if it cannot start a
// character, and the allowed range of the first continuation byte.
struct Lead {
  int length;
  uint8_t lo;
  uint8_t hi;
};

Lead ClassifyLead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // <= U+10FFFF
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  return {0, 0, 0};
}

// Decodes one step at `pos`. Returns the number of bytes consumed and sets
// *valid. If the input ends inside a possibly valid sequence, *incomplete is
// set and the whole rest is consumed.
size_t Step(std::string_view s, size_t pos, bool* valid, bool* incomplete) {
  *incomplete = false;
  const Lead lead = ClassifyLead(static_cast<uint8_t>(s[pos]));
  if (lead.length == 0) {
    *valid = false;
    return 1;
  }
  size_t i = 1;
  for (; i < static_cast<size_t>(lead.length); ++i) {
    if (pos + i >= s.size()) {
      *valid = false;
      *incomplete = true;
      return i;
    }
    const uint8_t c = static_cast<uint8_t>(s[pos + i]);
    const uint8_t lo = i == 1 ? lead.lo : 0x80;
    const uint8_t hi = i == 1 ? lead.hi : 0xBF;
    if (c < lo || c > hi) {
      *valid = false;  // maximal subpart ends before c; c is decoded afresh
      return i;
    }
  }
  *valid = true;
  return i;
}

}  // namespace

std::string SanitizeUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    bool valid = false;
    bool incomplete = false;
    const size_t n = Step(bytes, pos, &valid, &incomplete);
    if (valid) {
      out.append(bytes.substr(pos, n));
    } else {
      out.append(kReplacement);
    }
    pos += n;
  }
  return out;
}

size_t Utf8CompletePrefix(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    bool valid = false;
    bool incomplete = false;
    const size_t n = Step(bytes, pos, &valid, &incomplete);
    if (incomplete) return pos;
    pos += n;
  }
  return pos;
}

std::string Utf8Splitter::Push(std::string_view bytes) {
  pending_.append(bytes);
  const size_t complete = Utf8CompletePrefix(pending_);
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string Utf8Splitter::Flush() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace agentkv::api
