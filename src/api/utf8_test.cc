#include "api/utf8.h"

#include <random>

#include <gtest/gtest.h>

namespace agentkv::api {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Test, ValidTextUnchanged) {
  const std::string s = "héllo wörld — 日本語 🎉";
  EXPECT_EQ(SanitizeUtf8(s), s);
  EXPECT_EQ(Utf8CompletePrefix(s), s.size());
}

TEST(Utf8Test, InvalidBytesReplaced) {
  EXPECT_EQ(SanitizeUtf8("a\xFF" "b"), "a" + kFffd + "b");
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), kFffd + kFffd);          // overlong lead
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(SanitizeUtf8("\xE2\x82" "A"), kFffd + "A");        // truncated, then ASCII
  EXPECT_EQ(SanitizeUtf8("\xF0\x9F\x8E"), kFffd);              // truncated at end
}

TEST(Utf8Test, CompletePrefixHoldsBackIncompleteTail) {
  const std::string euro = "\xE2\x82\xAC";
  EXPECT_EQ(Utf8CompletePrefix("ab" + euro.substr(0, 2)), 2u);
  EXPECT_EQ(Utf8CompletePrefix("ab" + euro), 5u);
  EXPECT_EQ(Utf8CompletePrefix("ab\xFF"), 3u);  // invalid: decided, not held
}

TEST(Utf8Test, SplitterNeverSplitsACodePoint) {
  Utf8Splitter s;
  const std::string party = "\xF0\x9F\x8E\x89";
  EXPECT_EQ(s.Push(party.substr(0, 1)), "");
  EXPECT_EQ(s.Push(party.substr(1, 2)), "");
  EXPECT_EQ(s.Push(party.substr(3) + "x"), party + "x");
  EXPECT_EQ(s.Push(party.substr(0, 2)), "");
  EXPECT_EQ(s.Flush(), kFffd);
}

// Property: whatever the cut points, the pieces are valid UTF-8 and
// concatenate to SanitizeUtf8(whole) — the stream == non-stream guarantee.
TEST(Utf8Test, RandomSplitsConcatenateToSanitizedWhole) {
  std::mt19937 rng(42);
  const std::vector<std::string> atoms = {"a", " ", "é", "€", "🎉", "日", "\xFF", "\xE2\x82",
                                          "\xF0\x9F", "\x80", "\xED\xA0\x80", "\xC2"};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string whole;
    const int n_atoms = static_cast<int>(rng() % 20);
    for (int i = 0; i < n_atoms; ++i) whole += atoms[rng() % atoms.size()];
    Utf8Splitter splitter;
    std::string joined;
    size_t pos = 0;
    while (pos < whole.size()) {
      const size_t n = std::min<size_t>(1 + rng() % 4, whole.size() - pos);
      const std::string piece = splitter.Push(std::string_view(whole).substr(pos, n));
      EXPECT_EQ(SanitizeUtf8(piece), piece);
      joined += piece;
      pos += n;
    }
    joined += splitter.Flush();
    ASSERT_EQ(joined, SanitizeUtf8(whole)) << "iteration " << iter;
  }
}

}  // namespace
}  // namespace agentkv::api
