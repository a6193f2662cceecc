#include "prefix/prefix_match.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace agentkv {
namespace {

constexpr TokenSpan kBos{0, 0};

// Contiguous spans for the given token texts, optionally after a BOS.
std::vector<TokenSpan> SpansOf(const std::vector<std::string>& pieces, bool bos = false) {
  std::vector<TokenSpan> spans;
  if (bos) spans.push_back(kBos);
  uint32_t pos = 0;
  for (const auto& p : pieces) {
    spans.push_back({pos, pos + static_cast<uint32_t>(p.size())});
    pos += static_cast<uint32_t>(p.size());
  }
  return spans;
}

// Where the prefill resumes in P: the end of the last kept token's span.
size_t Resume(const PrefixMatch& m, std::span<const TokenSpan> spans) {
  return m.n_keep_tokens == 0 ? 0 : spans[m.n_keep_tokens - 1].end;
}

// A toy BPE-like tokenizer: greedy longest match over a vocabulary. Like real
// BPE it is context-dependent at the end of the text: "hello wor" ends in
// " wor", but inside "hello world" the same bytes become " world".
struct ToyTokenizer {
  std::vector<std::string> vocab;
  void Tokenize(std::string_view text, std::vector<int32_t>* ids, std::vector<TokenSpan>* spans) const {
    size_t pos = 0;
    while (pos < text.size()) {
      int32_t best = -1;
      size_t best_len = 0;
      for (size_t i = 0; i < vocab.size(); ++i) {
        if (vocab[i].size() > best_len && text.substr(pos).starts_with(vocab[i])) {
          best = static_cast<int32_t>(i);
          best_len = vocab[i].size();
        }
      }
      if (best < 0) best_len = 1;  // unknown byte: id -1, one byte
      ids->push_back(best);
      spans->push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + best_len)});
      pos += best_len;
    }
  }
};

TEST(PrefixMatchTest, ExactRefeedsLastToken) {
  const std::string c = "Hello world";
  auto spans = SpansOf({"Hello", " world"}, /*bos=*/true);
  PrefixMatch m = MatchPrefix(c, spans, c);
  EXPECT_EQ(m.type, MatchType::kExact);
  EXPECT_EQ(m.common_bytes, 11u);
  EXPECT_EQ(m.n_keep_tokens, 2u);  // BOS + "Hello"; " world" is re-fed for logits
  EXPECT_EQ(Resume(m, spans), 5u);
  EXPECT_FALSE(m.cold());
}

TEST(PrefixMatchTest, ExactSingleTokenKeepsBos) {
  auto spans = SpansOf({"a"}, /*bos=*/true);
  PrefixMatch m = MatchPrefix("a", spans, "a");
  EXPECT_EQ(m.type, MatchType::kExact);
  EXPECT_EQ(m.n_keep_tokens, 1u);  // BOS is never dropped
  EXPECT_EQ(Resume(m, spans), 0u);

  auto no_bos = SpansOf({"a"});
  m = MatchPrefix("a", no_bos, "a");
  EXPECT_EQ(m.type, MatchType::kExact);
  EXPECT_TRUE(m.cold());  // nothing left to keep: feed "a" from scratch
}

TEST(PrefixMatchTest, ExtendKeepsEverything) {
  const std::string c = "Hello world";
  auto spans = SpansOf({"Hello", " world"}, true);
  PrefixMatch m = MatchPrefix(c, spans, c + ", again");
  EXPECT_EQ(m.type, MatchType::kExtend);
  EXPECT_EQ(m.common_bytes, c.size());
  EXPECT_EQ(m.n_keep_tokens, 3u);
  EXPECT_EQ(Resume(m, spans), c.size());
}

TEST(PrefixMatchTest, DivergeDropsStraddlingToken) {
  const std::string c = "abcdefghij";
  auto spans = SpansOf({"ab", "cd", "ef", "gh", "ij"});
  PrefixMatch m = MatchPrefix(c, spans, "abcdefXYZ");  // L = 6
  EXPECT_EQ(m.type, MatchType::kDiverge);
  EXPECT_EQ(m.common_bytes, 6u);
  EXPECT_EQ(m.n_keep_tokens, 3u);
  EXPECT_EQ(Resume(m, spans), 6u);

  m = MatchPrefix(c, spans, "abcdeXYZ");  // L = 5; "ef" = [4,6) straddles
  EXPECT_EQ(m.type, MatchType::kDiverge);
  EXPECT_EQ(m.common_bytes, 5u);
  EXPECT_EQ(m.n_keep_tokens, 2u);
  EXPECT_EQ(Resume(m, spans), 4u);  // prefill "eXYZ"
}

TEST(PrefixMatchTest, FiftyPercentBoundary) {
  const std::string c = "abcdefghij";  // 10 bytes
  auto spans = SpansOf({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"});
  PrefixMatch m = MatchPrefix(c, spans, "abcdeZ");  // L = 5 = 50%
  EXPECT_EQ(m.type, MatchType::kDiverge);
  EXPECT_EQ(m.n_keep_tokens, 5u);
  m = MatchPrefix(c, spans, "abcdZ");  // L = 4 = 40%
  EXPECT_EQ(m.type, MatchType::kMiss);
  EXPECT_EQ(m.common_bytes, 4u);
  EXPECT_EQ(m.n_keep_tokens, 0u);
  EXPECT_EQ(Resume(m, spans), 0u);

  MatchOptions lax;
  lax.min_diverge_ratio = 0.3;
  m = MatchPrefix(c, spans, "abcdZ", lax);
  EXPECT_EQ(m.type, MatchType::kDiverge);
  EXPECT_EQ(m.n_keep_tokens, 4u);
}

TEST(PrefixMatchTest, DivergeWithOnlyBosLeftIsMiss) {
  // L >= 50% but the single text token straddles L: only BOS would remain.
  auto spans = SpansOf({"abcd"}, true);
  PrefixMatch m = MatchPrefix("abcd", spans, "abcX");
  EXPECT_EQ(m.type, MatchType::kMiss);
  EXPECT_TRUE(m.cold());
}

TEST(PrefixMatchTest, PromptIsPrefixOfCachedTextRefeedsOne) {
  const std::string c = "abcdefghij";
  auto spans = SpansOf({"ab", "cd", "ef", "gh", "ij"});
  PrefixMatch m = MatchPrefix(c, spans, "abcdefgh");  // L = len(P) = 8
  EXPECT_EQ(m.type, MatchType::kDiverge);
  EXPECT_EQ(m.n_keep_tokens, 3u);  // "gh" ends at len(P): re-fed
  EXPECT_EQ(Resume(m, spans), 6u);
}

TEST(PrefixMatchTest, MissAndEmptyInputs) {
  auto spans = SpansOf({"ab", "cd"}, true);
  PrefixMatch m = MatchPrefix("abcd", spans, "zzzz");
  EXPECT_EQ(m.type, MatchType::kMiss);
  EXPECT_TRUE(m.cold());

  m = MatchPrefix("", SpansOf({}, true), "hello");  // empty C
  EXPECT_EQ(m.type, MatchType::kMiss);
  EXPECT_TRUE(m.cold());
  m = MatchPrefix("", {}, "");
  EXPECT_EQ(m.type, MatchType::kMiss);

  m = MatchPrefix("abcd", spans, "");  // empty P
  EXPECT_EQ(m.type, MatchType::kMiss);
  EXPECT_EQ(m.common_bytes, 0u);
  EXPECT_TRUE(m.cold());
}

TEST(PrefixMatchTest, EmptySpanTokens) {
  // Trailing EOS (generated, no text) is not part of P's text: dropped on EXTEND.
  const std::string c = "Hi there";
  std::vector<TokenSpan> spans = SpansOf({"Hi", " there"}, true);
  spans.push_back({8, 8});
  PrefixMatch m = MatchPrefix(c, spans, c + " more");
  EXPECT_EQ(m.type, MatchType::kExtend);
  EXPECT_EQ(m.n_keep_tokens, 3u);
  EXPECT_EQ(Resume(m, spans), 8u);

  m = MatchPrefix(c, spans, c);
  EXPECT_EQ(m.type, MatchType::kExact);
  EXPECT_EQ(m.n_keep_tokens, 2u);  // BOS, "Hi"; " there" re-fed; EOS gone
  EXPECT_EQ(Resume(m, spans), 2u);

  // A mid-context empty span followed by shared text is kept.
  std::vector<TokenSpan> mid = {{0, 2}, {2, 2}, {2, 4}, {4, 6}};
  m = MatchPrefix("abcdef", mid, "abcdXY");
  EXPECT_EQ(m.type, MatchType::kDiverge);
  EXPECT_EQ(m.n_keep_tokens, 3u);
  EXPECT_EQ(Resume(m, mid), 4u);
  // ... but not when it sits exactly at L (P's continuation may differ).
  m = MatchPrefix("abcdef", mid, "abXYZW");
  EXPECT_EQ(m.type, MatchType::kMiss);  // L = 2 of 6 < 50%
  MatchOptions lax;
  lax.min_diverge_ratio = 0.2;
  m = MatchPrefix("abcdef", mid, "abXYZW", lax);
  EXPECT_EQ(m.n_keep_tokens, 1u);
  EXPECT_EQ(Resume(m, mid), 2u);
}

TEST(PrefixMatchTest, SpansWithGaps) {
  // Token 1 starts at 3: byte 2 is not covered (e.g. a normalized-away space).
  std::vector<TokenSpan> spans = {{0, 2}, {3, 5}, {5, 7}};
  PrefixMatch m = MatchPrefix("ab cdef", spans, "ab cdXY");
  EXPECT_EQ(m.type, MatchType::kDiverge);
  EXPECT_EQ(m.n_keep_tokens, 2u);
  EXPECT_EQ(Resume(m, spans), 5u);
}

TEST(PrefixMatchTest, UnalignedSpansAreNeverKept) {
  // The engine marks tokens after a piece/text mismatch {0xFFFFFFFF, 0xFFFFFFFF}.
  constexpr uint32_t kUnaligned = 0xFFFFFFFFu;
  std::vector<TokenSpan> spans = {kBos, {0, 2}, {2, 4}, {kUnaligned, kUnaligned}, {kUnaligned, kUnaligned}};
  PrefixMatch m = MatchPrefix("abcdef", spans, "abcdefgh");
  EXPECT_EQ(m.type, MatchType::kExtend);
  EXPECT_EQ(m.n_keep_tokens, 3u);
  EXPECT_EQ(Resume(m, spans), 4u);  // prefill "efgh"
}

TEST(PrefixMatchTest, Utf8NeverCutsCodePoint) {
  // "café" vs "cafè": é = C3 A9, è = C3 A8 share the lead byte.
  const std::string c = "caf\xC3\xA9";
  EXPECT_EQ(CommonPrefixBytes(c, "caf\xC3\xA8"), 3u);
  PrefixMatch m = MatchPrefix(c, SpansOf({"caf", "\xC3\xA9"}), "caf\xC3\xA8!");
  EXPECT_EQ(m.type, MatchType::kDiverge);
  EXPECT_EQ(m.common_bytes, 3u);
  EXPECT_EQ(m.n_keep_tokens, 1u);
  EXPECT_EQ(Resume(m, SpansOf({"caf", "\xC3\xA9"})), 3u);

  // 4-byte code points split into byte-fallback tokens: 😀 F0 9F 98 80 vs 😁 ..81.
  const std::string e = "abcd\xF0\x9F\x98\x80";
  auto byte_spans = SpansOf({"abcd", "\xF0\x9F", "\x98\x80"});
  m = MatchPrefix(e, byte_spans, "abcd\xF0\x9F\x98\x81");
  EXPECT_EQ(m.type, MatchType::kDiverge);  // L = 4 of 8
  EXPECT_EQ(m.common_bytes, 4u);
  EXPECT_EQ(m.n_keep_tokens, 1u);  // never keeps the half-code-point token
  EXPECT_EQ(Resume(m, byte_spans), 4u);

  // Cached text ending inside a code point, prompt completes it: L backs off.
  m = MatchPrefix("ab\xF0\x9F", SpansOf({"ab", "\xF0\x9F"}), "ab\xF0\x9F\x98\x80");
  EXPECT_EQ(m.type, MatchType::kDiverge);
  EXPECT_EQ(m.common_bytes, 2u);
  EXPECT_EQ(m.n_keep_tokens, 1u);
}

TEST(PrefixMatchTest, CharLevelReusesMoreThanTokenIds) {
  ToyTokenizer tok{{"hello", " wor", " world", "ld", "!", " ", "w", "o", "r", "l", "d"}};
  const std::string c = "hello wor";       // turn 1 ended mid-word
  const std::string p = "hello world!";    // turn 2 continues it
  std::vector<int32_t> c_ids, p_ids;
  std::vector<TokenSpan> c_spans, p_spans;
  tok.Tokenize(c, &c_ids, &c_spans);
  tok.Tokenize(p, &p_ids, &p_spans);
  ASSERT_EQ(c_ids.size(), 2u);  // [hello][ wor]
  ASSERT_EQ(p_ids.size(), 3u);  // [hello][ world][!]: context-dependent

  const size_t by_ids = CommonTokenPrefix(c_ids, p_ids);
  PrefixMatch m = MatchPrefix(c, c_spans, p);
  EXPECT_EQ(by_ids, 1u);
  EXPECT_EQ(m.type, MatchType::kExtend);
  EXPECT_EQ(m.n_keep_tokens, 2u);
  EXPECT_GT(m.n_keep_tokens, by_ids);
  EXPECT_EQ(p.substr(Resume(m, c_spans)), "ld!");
}

TEST(PrefixMatchTest, CommonTokenPrefix) {
  std::vector<int32_t> a = {1, 2, 3}, b = {1, 2, 4, 5};
  EXPECT_EQ(CommonTokenPrefix(a, b), 2u);
  EXPECT_EQ(CommonTokenPrefix(a, a), 3u);
  EXPECT_EQ(CommonTokenPrefix({}, a), 0u);
}

// Invariants over random texts from a small alphabet (with a 2-byte letter).
TEST(PrefixMatchTest, RandomInvariants) {
  ToyTokenizer tok{{"a", "b", "ab", "ba", "aab", "\xC3\xA9", "a\xC3\xA9", "bb"}};
  const std::vector<std::string> letters = {"a", "b", "\xC3\xA9"};
  std::mt19937 rng(42);
  auto random_text = [&](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += letters[rng() % letters.size()];
    return s;
  };
  for (int iter = 0; iter < 2000; ++iter) {
    std::string c = random_text(rng() % 12);
    std::string p = (rng() % 2) ? c.substr(0, rng() % (c.size() + 1)) + random_text(rng() % 6)
                                : random_text(rng() % 12);
    std::vector<int32_t> ids;
    std::vector<TokenSpan> spans = {kBos};
    tok.Tokenize(c, &ids, &spans);
    PrefixMatch m = MatchPrefix(c, spans, p);
    ASSERT_LE(m.common_bytes, std::min(c.size(), p.size()));
    ASSERT_EQ(c.substr(0, m.common_bytes), p.substr(0, m.common_bytes));
    ASSERT_LE(Resume(m, spans), m.common_bytes);
    auto is_cont = [](const std::string& s, size_t i) {
      return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
    };
    ASSERT_FALSE(is_cont(c, m.common_bytes) || is_cont(p, m.common_bytes)) << "L inside a code point";
    ASSERT_LE(m.n_keep_tokens, spans.size());
    for (size_t i = 0; i < m.n_keep_tokens; ++i) ASSERT_LE(spans[i].end, m.common_bytes);
    if (m.type == MatchType::kMiss) {
      ASSERT_TRUE(m.cold());
    } else if (!p.empty()) {
      ASSERT_LT(Resume(m, spans), p.size()) << "nothing left to feed";
    }
    // Kept tokens + tokenized remainder spell exactly P.
    std::string rebuilt = c.substr(0, Resume(m, spans)) + p.substr(Resume(m, spans));
    ASSERT_EQ(rebuilt, p);
  }
}

}  // namespace
}  // namespace agentkv
