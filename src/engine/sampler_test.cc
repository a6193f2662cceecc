#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "engine/bundled_model_fixture.h"
#include "engine/chat_format.h"
#include "engine/grammar.h"
#include "engine/tokenizer.h"

namespace agentkv::engine {
namespace {

// The one-pass argmax Greedy must agree with: first id of the largest value,
// NaN never larger than anything.
int32_t Reference(const std::vector<float>& logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

TEST(SamplerGreedyTest, PicksTheFirstLargestLikeAOnePassArgmax) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);  // few distinct values: many ties
  std::normal_distribution<float> wide;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t n : {size_t{1}, size_t{2}, size_t{15}, size_t{16}, size_t{17}, size_t{33}, size_t{1000}, size_t{32003}}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> logits(n);
      for (float& x : logits) x = trial % 2 ? static_cast<float>(small(rng)) : wide(rng);
      if (trial % 5 == 1) logits[rng() % n] = nan;
      if (trial % 5 == 2) logits[rng() % n] = -inf;
      if (trial % 5 == 3) logits[n - 1] = 100.0f;  // the largest in the tail past the last full lane group
      if (trial % 7 == 4) logits[0] = nan;          // a NaN first: the pick is 0
      if (trial % 9 == 5) {                         // signed zeros tie
        for (float& x : logits) x = -1.0f;
        logits[rng() % n] = -0.0f;
        logits[rng() % n] = 0.0f;
      }
      ASSERT_EQ(Sampler::Greedy(logits), Reference(logits)) << "n " << n << ", trial " << trial;
    }
  }
  EXPECT_EQ(Sampler::Greedy({}), 0);
  const std::vector<float> all_minus_inf(40, -inf);
  EXPECT_EQ(Sampler::Greedy(all_minus_inf), 0);
}

// Grammar sampling on the bundled model's 32K vocabulary.
class SamplerGrammarTest : public testing::BundledModelTest {
 protected:
  static std::shared_ptr<const Grammar> Compile(const std::string& gbnf) {
    GrammarSpec spec;
    spec.gbnf = gbnf;
    Result<std::shared_ptr<const Grammar>> g = Grammar::Compile(*model_, spec);
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? g.value() : nullptr;
  }
  static size_t NVocab() { return static_cast<size_t>(model_->info().n_vocab); }
};

// A small JSON object grammar (as a schema's would be).
constexpr const char* kJsonGbnf =
    "root ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws str ws \",\" ws \"\\\"n\\\"\" ws \":\" ws [0-9]+ ws \"}\"\n"
    "str ::= \"\\\"\" [a-z ]* \"\\\"\"\n"
    "ws ::= [ ]?\n";

// The reference: mask the whole vocabulary, then the best allowed logit,
// ties to the lowest id (the old Sampler::Sample).
int32_t MaskedArgmax(const GrammarState& state, const std::vector<float>& logits) {
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::unique_ptr<bool[]> allowed(new bool[ids.size()]());
  state.Check(ids, std::span<bool>(allowed.get(), ids.size()));
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (allowed[i] && (best < 0 || logits[i] > logits[best])) best = static_cast<int32_t>(i);
  }
  return best;
}

TEST_F(SamplerGrammarTest, GreedyPicksWhatMaskingTheWholeVocabularyPicks) {
  std::shared_ptr<const Grammar> g = Compile(kJsonGbnf);
  ASSERT_NE(g, nullptr);
  std::mt19937 rng(11);
  std::normal_distribution<float> wide;
  std::uniform_int_distribution<int> small(-2, 2);
  Tokenizer tok(*model_);
  for (int run = 0; run < 6; ++run) {
    Sampler sampler({}, g);
    GrammarState reference(*g);
    for (int step = 0; step < 24; ++step) {
      std::vector<float> logits(NVocab());
      for (float& x : logits) x = run % 2 ? static_cast<float>(small(rng)) : wide(rng);  // odd runs: many ties
      const int32_t want = MaskedArgmax(reference, logits);
      ASSERT_GE(want, 0);
      // Some steps: the allowed token is also the unconstrained best (the
      // pick-first path); others: it ranks ~100th or lower (the fallback).
      if (step % 3 == 0) logits[want] = 100.0f;
      const int32_t expect = step % 3 == 0 ? want : MaskedArgmax(reference, logits);
      Result<int32_t> got = sampler.Sample(logits);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_EQ(got.value(), expect) << "run " << run << ", step " << step;
      ASSERT_TRUE(reference.Accept(expect).ok());
      if (tok.IsEndOfGeneration(expect)) break;
    }
  }
}

TEST_F(SamplerGrammarTest, JudgesOnlyTheUnconstrainedPickWhenTheGrammarAllowsIt) {
  std::shared_ptr<const Grammar> g = Compile(kJsonGbnf);
  ASSERT_NE(g, nullptr);
  Sampler sampler({}, g);
  GrammarState reference(*g);
  std::mt19937 rng(5);
  std::normal_distribution<float> wide;
  for (int step = 0; step < 10; ++step) {
    std::vector<float> logits(NVocab());
    for (float& x : logits) x = wide(rng);
    const int32_t want = MaskedArgmax(reference, logits);
    logits[want] = 100.0f;  // a model that follows the format
    ASSERT_EQ(sampler.Sample(logits).value(), want);
    ASSERT_TRUE(reference.Accept(want).ok());
  }
  // One candidate per step, not the 32K vocabulary.
  EXPECT_EQ(sampler.grammar_candidates(), 10u);
}

TEST_F(SamplerGrammarTest, WithTemperatureDrawsOnlyAllowedTokens) {
  std::shared_ptr<const Grammar> g = Compile(kJsonGbnf);
  ASSERT_NE(g, nullptr);
  for (SamplingParams p : {SamplingParams{0.8f, 0, 1.0f, 3}, SamplingParams{1.0f, 40, 0.9f, 4}}) {
    Sampler sampler(p, g);
    GrammarState reference(*g);
    std::mt19937 rng(9);
    std::normal_distribution<float> wide;
    for (int step = 0; step < 16; ++step) {
      std::vector<float> logits(NVocab());
      for (float& x : logits) x = 3.0f * wide(rng);
      Result<int32_t> got = sampler.Sample(logits);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_TRUE(reference.Allows(got.value())) << "step " << step;
      ASSERT_TRUE(reference.Accept(got.value()).ok());
    }
  }
}

TEST_F(SamplerGrammarTest, EndsWithAnErrorOnceTheGrammarBudgetIsSpent) {
  std::shared_ptr<const Grammar> g = Compile(kJsonGbnf);
  ASSERT_NE(g, nullptr);
  SamplingParams p;
  p.grammar_budget_base_ms = 0.0;  // spent before the first candidate
  p.grammar_budget_per_token_ms = 0.0;
  Sampler sampler(p, g);
  std::vector<float> logits(NVocab(), 0.0f);
  Result<int32_t> got = sampler.Sample(logits);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("budget"), std::string::npos) << got.status().ToString();
  EXPECT_EQ(sampler.grammar_candidates(), 0u);
  EXPECT_FALSE(sampler.Sample(logits).ok());  // and stays failed
}

TEST_F(SamplerGrammarTest, FollowsAGrammarToItsEndOfGeneration) {
  // Flat logits: every pick is the lowest allowed id (the fallback each
  // step); once "hello" is complete only an end-of-generation token is.
  std::shared_ptr<const Grammar> g = Compile("root ::= \"hello\"\n");
  ASSERT_NE(g, nullptr);
  Sampler sampler({}, g);
  Tokenizer tok(*model_);
  std::vector<float> logits(NVocab(), 0.0f);
  // Steer to "hello" until the grammar is complete, then it allows EOG only.
  GrammarState reference(*g);
  for (int step = 0; step < 8; ++step) {
    const int32_t want = MaskedArgmax(reference, logits);
    ASSERT_GE(want, 0);
    Result<int32_t> got = sampler.Sample(logits);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got.value(), want);
    if (tok.IsEndOfGeneration(want)) return;
    ASSERT_TRUE(reference.Accept(want).ok());
  }
  FAIL() << "the grammar never allowed only the end of generation";
}

// Issue 30: a weak model pads a closed call with the whitespace the grammar
// still allows, to max_tokens. Once the grammar is complete a blank pick is
// the end token; before that blanks are sampled as usual.
TEST_F(SamplerGrammarTest, EndsInsteadOfPaddingACompleteSentenceWithWhitespace) {
  std::shared_ptr<const Grammar> g = Compile("root ::= \"{\" [ \\n]* \"}\" [ \\n]*\n");
  ASSERT_NE(g, nullptr);
  Tokenizer tok(*model_);
  const int32_t newline = 13;  // "<0x0A>" in the bundled vocabulary
  ASSERT_EQ(tok.Piece(newline), "\n");
  const int32_t open = 29912, close = 29913;  // "{", "}"
  ASSERT_EQ(tok.Piece(open), "{");
  ASSERT_EQ(tok.Piece(close), "}");
  // What the model wants at each step: "{", two newlines, "}", then
  // newlines forever.
  const int32_t wants[] = {open, newline, newline, close, newline, newline, newline};
  Sampler sampler({}, g);
  std::string text;
  for (int32_t want : wants) {
    std::vector<float> logits(NVocab(), 0.0f);
    logits[want] = 10.0f;
    Result<int32_t> got = sampler.Sample(logits);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    if (tok.IsEndOfGeneration(got.value())) {
      EXPECT_EQ(text, "{\n\n}");  // blanks inside were kept; the first one after "}" ended it
      return;
    }
    text += tok.Piece(got.value());
  }
  FAIL() << "never ended: " << text;
}

}  // namespace
}  // namespace agentkv::engine
