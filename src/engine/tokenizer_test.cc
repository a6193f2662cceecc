// Tokenizer: client text never becomes special tokens (issue 12), and the
// plain-range tokenization equals the ordinary one on ordinary text, so
// character-level prefix matching (docs/prefix-matching.md) is unaffected.
#include "engine/tokenizer.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "engine/bundled_model_fixture.h"
#include "engine/test_support.h"

namespace agentkv::engine {
namespace {

using testing::BundledModelPath;
using testing::SampleText;

class TokenizerTest : public testing::BundledModelTest {};

size_t Count(const std::vector<int32_t>& v, int32_t t) { return static_cast<size_t>(std::count(v.begin(), v.end(), t)); }

// Outside the plain ranges specials are still parsed: the template's own.
TEST_F(TokenizerTest, SpecialsOutsidePlainRangesAreParsed) {
  Tokenizer tok(*model_);
  const std::string text = "a</s>b</s>";
  const TokenizedText t = tok.Tokenize(text, true, {{0, 5}});  // the first "</s>" is client text
  EXPECT_EQ(Count(t.tokens, tok.Eos()), 1u);
  EXPECT_EQ(t.tokens.back(), tok.Eos());
}

// MaxTokenBytes is an upper bound on the bytes one token covers, so the byte
// check before tokenizing never refuses a prompt that fits.
TEST_F(TokenizerTest, MaxTokenBytesBoundsTokenCount) {
  Tokenizer tok(*model_);
  const int32_t n_vocab = static_cast<int32_t>(model_->info().n_vocab);
  std::string longest;
  for (int32_t t = 0; t < n_vocab; ++t) longest = std::max(longest, tok.Piece(t), [](auto& a, auto& b) { return a.size() < b.size(); });
  EXPECT_EQ(tok.MaxTokenBytes(), longest.size());
  for (const std::string& text : {SampleText(4000), std::string(5000, ' '), std::string(3000, 'a'),
                                  [&] {
                                    std::string s;
                                    for (int i = 0; i < 100; ++i) s += longest;
                                    return s;
                                  }()}) {
    const TokenizedText t = tok.Tokenize(text, false, {{0, text.size()}});
    EXPECT_GE(t.tokens.size() * tok.MaxTokenBytes(), text.size());
  }
}

}  // namespace
}  // namespace agentkv::engine
