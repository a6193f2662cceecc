// Reasoning-content separation through common's chat layer, with real
// reasoning templates from llama.cpp's models/templates (the bundled model
// has none): DeepSeek-R1-Distill opens <think> in the generation prompt
// (thinking forced open), Qwen3 lets the model open it and closes it itself
// when enable_thinking is false. Replies are fed in small pieces, as the
// scheduler feeds generated text, so the streaming (partial) parse is what
// is tested; Finish() is the final full parse.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "engine/bundled_model_fixture.h"
#include "engine/chat_format.h"

namespace agentkv::engine {
namespace {

std::string ReadTemplate(const std::string& name) {
  std::ifstream in(std::string(AGENTKV_LLAMA_DIR) + "/models/templates/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

constexpr const char* kR1 = "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja";
constexpr const char* kQwen3 = "Qwen-Qwen3-0.6B.jinja";

struct Split {
  std::string reasoning, content;
};

// Feeds `reply` in pieces of `step` bytes, then finishes.
Split Feed(const ChatPrompt& p, const std::string& reply, size_t step) {
  ReplyParser parser(p.reply_format, [] { return std::string("call_0"); });
  Split out;
  auto take = [&](const std::vector<ReplyDelta>& ds) {
    for (const ReplyDelta& d : ds) {
      out.reasoning += d.reasoning_content;
      out.content += d.content;
    }
  };
  for (size_t i = 0; i < reply.size(); i += step) take(parser.Append(reply.substr(i, step)));
  take(parser.Finish());
  return out;
}

class ChatReasoningTest : public testing::BundledModelTest {
 protected:
  void SetUp() override { tok_ = std::make_unique<Tokenizer>(*model_); }
  std::unique_ptr<ChatFormat> Format(const char* file) {
    const std::string source = ReadTemplate(file);
    EXPECT_FALSE(source.empty()) << file << " not found under " << AGENTKV_LLAMA_DIR;
    EXPECT_TRUE(ChatFormat::CheckTemplate(*model_, source).ok());
    auto f = ChatFormat::Create(*model_, *tok_, source);
    EXPECT_FALSE(f->uses_fallback_template());
    return f;
  }
  static ChatPrompt Render(const ChatFormat& f, const ChatRequest& r) {
    Result<ChatPrompt> p = f.Render(r);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? std::move(p).value() : ChatPrompt{};
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(ChatReasoningTest, ForcedOpenThinkingIsReasoningUntilClosed) {
  auto f = Format(kR1);
  ChatRequest r;
  r.messages = {{"user", "Hi"}};
  r.reasoning_format = ReasoningFormat::kAuto;
  const ChatPrompt p = Render(*f, r);
  EXPECT_TRUE(p.rendered.text.ends_with("<｜Assistant｜><think>\n")) << p.rendered.text;
  ASSERT_NE(p.reply_format, nullptr);
  // The reasoning starts after the tag, so the newline the template wrote
  // after <think> is its first byte (common keeps it; llama-server too).
  for (size_t step : {1, 2, 5, 100}) {
    const Split s = Feed(p, "abc</think>answer", step);
    EXPECT_EQ(s.reasoning, "\nabc") << step;
    EXPECT_EQ(s.content, "answer") << step;
  }
  // Never closed (max_tokens, or a model that only thinks): all reasoning.
  const Split open = Feed(p, "still thinking about it", 3);
  EXPECT_EQ(open.reasoning, "\nstill thinking about it");
  EXPECT_EQ(open.content, "");
  // A partial closing tag is held back, not sent as reasoning.
  ReplyParser parser(p.reply_format, [] { return std::string(); });
  std::string early;
  for (const ReplyDelta& d : parser.Append("abc</thi")) early += d.reasoning_content;
  EXPECT_EQ(early.find('<'), std::string::npos) << early;
}

TEST_F(ChatReasoningTest, NoneLeavesThinkingInTheContent) {
  auto f = Format(kR1);
  ChatRequest r;
  r.messages = {{"user", "Hi"}};
  r.reasoning_format = ReasoningFormat::kNone;
  const ChatPrompt p = Render(*f, r);
  EXPECT_EQ(p.reply_format, nullptr);  // the reply is plain content, as before
}

TEST_F(ChatReasoningTest, ModelOpenedThinkingAndEnableThinkingFalse) {
  auto f = Format(kQwen3);
  ChatRequest r;
  r.messages = {{"user", "Hi"}};
  r.reasoning_format = ReasoningFormat::kDeepseek;
  const ChatPrompt p = Render(*f, r);
  ASSERT_NE(p.reply_format, nullptr);
  const Split s = Feed(p, "<think>\nabc\n</think>\n\nanswer", 2);
  EXPECT_EQ(s.reasoning, "abc\n");  // common drops the newline after <think>, keeps the one before </think>
  EXPECT_EQ(s.content, "answer");
  // A reply without thinking is all content.
  EXPECT_EQ(Feed(p, "just an answer", 4).content, "just an answer");

  r.enable_thinking = false;  // the template closes an empty think block itself
  const ChatPrompt off = Render(*f, r);
  EXPECT_TRUE(off.rendered.text.ends_with("<think>\n\n</think>\n\n")) << off.rendered.text;
}

// What prefix matching sees on the next turn. R1's template drops earlier
// turns' thinking (and never renders reasoning_content), so the next turn
// DIVERGEs right where the thinking began; Qwen3 renders reasoning_content
// sent back for turns after the last user message (a tool loop), so there
// the client's reasoning_content reaches the prompt.
TEST_F(ChatReasoningTest, NextTurnsAndReasoningSentBack) {
  auto r1 = Format(kR1);
  ChatRequest r;
  r.reasoning_format = ReasoningFormat::kAuto;
  r.messages = {{"user", "Hi"}};
  const std::string turn1 = Render(*r1, r).rendered.text;
  const std::string cached = turn1 + "abc</think>answer";
  for (bool send_back : {false, true}) {
    ChatRequest next = r;
    ChatMessage reply{"assistant", "answer"};
    if (send_back) reply.reasoning_content = "abc";
    next.messages.push_back(reply);
    next.messages.push_back({"user", "More"});
    const std::string turn2 = Render(*r1, next).rendered.text;
    size_t common = 0;
    while (common < turn2.size() && common < cached.size() && turn2[common] == cached[common]) ++common;
    EXPECT_EQ(common, turn1.size() - std::string("<think>\n").size()) << send_back << "\n" << turn2;
  }

  auto qwen = Format(kQwen3);
  ChatRequest loop;
  loop.reasoning_format = ReasoningFormat::kAuto;
  loop.messages = {{"user", "Weather in Paris?"}};
  ChatMessage call{"assistant", "", {{"call_1", "get_weather", R"({"city":"Paris"})"}}};
  call.reasoning_content = "I should call the tool.";
  loop.messages.push_back(call);
  loop.messages.push_back({"tool", "sunny", {}, "call_1"});
  const std::string with = Render(*qwen, loop).rendered.text;
  EXPECT_NE(with.find("<think>\nI should call the tool.\n</think>"), std::string::npos) << with;
  loop.messages[1].reasoning_content.clear();
  EXPECT_EQ(Render(*qwen, loop).rendered.text.find("I should call"), std::string::npos);
}

}  // namespace
}  // namespace agentkv::engine
