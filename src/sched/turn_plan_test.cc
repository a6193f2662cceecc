// TurnPlan with the bundled model's real SentencePiece tokenizer.
#include "sched/turn_plan.h"

#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/test_support.h"

namespace agentkv::sched {
namespace {

class TurnPlanTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = std::move(engine::Model::Load(engine::testing::BundledModelPath())).value().release();
  }
  static void TearDownTestSuite() { delete model_; }
  static engine::Model* model_;
};
engine::Model* TurnPlanTest::model_ = nullptr;

CachedSequence Cached(const engine::Tokenizer& tok, const std::string& text) {
  auto t = tok.Tokenize(text, true);
  return {text, t.tokens, t.spans};
}

// Cached tokens + planned new tokens must spell the prompt.
void ExpectSpellsPrompt(const engine::Tokenizer& tok, const CachedSequence& c, const TurnPlan& p,
                        const std::string& prompt) {
  std::vector<int32_t> all(c.tokens.begin(), c.tokens.begin() + p.n_keep);
  all.insert(all.end(), p.new_tokens.begin(), p.new_tokens.end());
  std::string text = tok.Detokenize(all);
  // SentencePiece renders the first word with its dummy-prefix space.
  if (text.starts_with("<s>")) text = text.substr(3);
  if (!prompt.starts_with(" ") && text.starts_with(" ")) text = text.substr(1);
  EXPECT_EQ(text, prompt);
}

TEST_F(TurnPlanTest, ExtendKeepsEverythingAndFeedsOnlyTheNewText) {
  engine::Tokenizer tok(*model_);
  const std::string c = "The jury said it did find that the city";
  const std::string p = c + " executive committee had been thorough.";
  CachedSequence cached = Cached(tok, c);
  TurnPlan plan = PlanTurn(tok, cached, p, 1u << 30);
  EXPECT_EQ(plan.match, MatchType::kExtend);
  EXPECT_EQ(plan.n_keep, cached.tokens.size());
  EXPECT_LE(plan.new_tokens.size(), 8u);
  ExpectSpellsPrompt(tok, cached, plan, p);
}

TEST_F(TurnPlanTest, ExactRefeedsTheLastToken) {
  engine::Tokenizer tok(*model_);
  const std::string c = "It is a truth universally acknowledged.";
  CachedSequence cached = Cached(tok, c);
  TurnPlan plan = PlanTurn(tok, cached, c, 1u << 30);
  EXPECT_EQ(plan.match, MatchType::kExact);
  EXPECT_EQ(plan.n_keep + 1, cached.tokens.size());
  ASSERT_EQ(plan.new_tokens.size(), 1u);
  EXPECT_EQ(plan.new_tokens[0], cached.tokens.back());
}

TEST_F(TurnPlanTest, DivergeKeepsTheCommonPrefixAndMissBelowHalf) {
  engine::Tokenizer tok(*model_);
  const std::string c = "The committee met on Monday and approved the budget for the year.";
  CachedSequence cached = Cached(tok, c);
  const std::string p = "The committee met on Monday and approved the plan.";
  TurnPlan plan = PlanTurn(tok, cached, p, 1u << 30);
  ASSERT_EQ(plan.match, MatchType::kDiverge);
  ASSERT_GT(plan.n_keep, 5u);
  EXPECT_LE(cached.spans[plan.n_keep - 1].end, p.find("plan"));
  ExpectSpellsPrompt(tok, cached, plan, p);

  TurnPlan miss = PlanTurn(tok, cached, "The dog barked.", 1u << 30);
  EXPECT_EQ(miss.match, MatchType::kMiss);
  EXPECT_EQ(miss.n_keep, 0u);
  EXPECT_EQ(miss.new_tokens, tok.Tokenize("The dog barked.", true).tokens);
}

TEST_F(TurnPlanTest, MaxReusableCapsTheKeptTokens) {
  engine::Tokenizer tok(*model_);
  const std::string c = "One two three four five six seven eight nine ten.";
  CachedSequence cached = Cached(tok, c);
  TurnPlan plan = PlanTurn(tok, cached, c + " Eleven.", 4);
  EXPECT_LE(plan.n_keep, 4u);
  ExpectSpellsPrompt(tok, cached, plan, c + " Eleven.");
}

// BPE/SentencePiece tokenization depends on context: a text's prefix alone
// can tokenize differently than inside the whole text. (1) Find such a case
// in real text with the bundled tokenizer. (2) Generated tokens are such a
// case: the model emits pieces a fresh tokenization of the same text would
// merge differently. Character-level matching keeps them all; token-id
// matching (fresh tokenization of the next prompt vs cached ids) stops at the
// first difference.
TEST_F(TurnPlanTest, CharacterLevelBeatsTokenIdMatchingOnRealTokenizer) {
  engine::Tokenizer tok(*model_);
  const std::string text = engine::testing::SampleText(600);
  const auto whole = tok.Tokenize(text, true).tokens;
  size_t found_cut = 0;
  for (size_t cut = 10; cut < text.size() && found_cut == 0; ++cut) {
    auto alone = tok.Tokenize(text.substr(0, cut), true).tokens;
    if (CommonTokenPrefix(alone, whole) < alone.size()) found_cut = cut;
  }
  ASSERT_GT(found_cut, 0u) << "no context-dependent tokenization found";
  {
    CachedSequence cached = Cached(tok, text.substr(0, found_cut));
    TurnPlan plan = PlanTurn(tok, cached, text, 1u << 30);
    EXPECT_GE(plan.n_keep, CommonTokenPrefix(cached.tokens, whole));
    ExpectSpellsPrompt(tok, cached, plan, text);
  }

  // (2) Over many cut points character-level never reuses less than
  // token-id matching (SentencePiece here re-tokenizes differently only at
  // the cut, so the two usually tie).
  for (size_t cut = 20; cut + 20 < text.size(); cut += 7) {
    CachedSequence cached = Cached(tok, text.substr(0, cut));
    TurnPlan plan = PlanTurn(tok, cached, text, 1u << 30);
    const size_t token_level = CommonTokenPrefix(cached.tokens, whole);
    ASSERT_GE(plan.n_keep, std::min(token_level, cached.tokens.size() - 1)) << "cut " << cut;
  }

  // (3) A cache whose tokens spell the text differently from a fresh
  // tokenization (a model may emit a word as byte-fallback tokens): the
  // 10th token is replaced by its bytes (<0xNN> tokens, ids 3..258 in this
  // vocabulary). Token-id matching stops there; character level keeps all.
  CachedSequence cached = Cached(tok, text.substr(0, 300));
  CachedSequence respelled;
  respelled.text = cached.text;
  for (size_t i = 0; i < cached.tokens.size(); ++i) {
    const auto sp = cached.spans[i];
    if (i != 10) {
      respelled.tokens.push_back(cached.tokens[i]);
      respelled.spans.push_back(sp);
      continue;
    }
    for (uint32_t b = sp.begin; b < sp.end; ++b) {
      const int32_t byte_token = 3 + static_cast<unsigned char>(cached.text[b]);
      ASSERT_EQ(tok.Piece(byte_token), std::string(1, cached.text[b]));
      respelled.tokens.push_back(byte_token);
      respelled.spans.push_back({b, b + 1});
    }
  }
  TurnPlan plan = PlanTurn(tok, respelled, text, 1u << 30);
  const size_t token_level = CommonTokenPrefix(respelled.tokens, whole);
  EXPECT_EQ(token_level, 10u);
  EXPECT_EQ(plan.match, MatchType::kExtend);
  EXPECT_GE(plan.n_keep + 1, respelled.tokens.size());
  EXPECT_GT(plan.n_keep, token_level + 20);
  ExpectSpellsPrompt(tok, respelled, plan, text);
}

}  // namespace
}  // namespace agentkv::sched
