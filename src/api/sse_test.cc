#include "api/sse.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace agentkv::api {
namespace {

using nlohmann::json;

std::vector<std::string> Frames(const std::string& sse) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    const std::string frame = sse.substr(pos, end - pos);
    EXPECT_EQ(frame.rfind("data: ", 0), 0u) << frame;
    out.push_back(frame.substr(6));
    pos = end + 2;
  }
  return out;
}

// Tool calls stream as OpenAI streams them, after any pending content.
TEST(SseTest, ToolCallDeltas) {
  SseEncoder enc({"id", "m", 1, RequestKind::kChat}, /*include_usage=*/false);
  std::string s = enc.Delta("Let me check\xE2\x82");
  s += enc.ToolCall({0, "call_1", "get_weather", "{\"city\""});
  s += enc.ToolCall({0, "", "", ":\"Paris\"}"});
  s += enc.Finish(FinishReason::kToolCalls, Usage{});
  const auto frames = Frames(s);
  ASSERT_EQ(frames.size(), 7u);  // role, content, flushed content, 2 tool calls, finish, [DONE]
  EXPECT_EQ(json::parse(frames[1])["choices"][0]["delta"]["content"], "Let me check");
  EXPECT_EQ(json::parse(frames[2])["choices"][0]["delta"]["content"], "\xEF\xBF\xBD");  // the cut code point
  const json first = json::parse(frames[3])["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(first, json::parse(R"({"index":0,"id":"call_1","type":"function",
                                   "function":{"name":"get_weather","arguments":"{\"city\""}})"));
  const json more = json::parse(frames[4])["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(more, json::parse(R"({"index":0,"function":{"arguments":":\"Paris\"}"}})"));
  EXPECT_EQ(json::parse(frames[5])["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(frames[6], "[DONE]");
}

// A reasoning model's thinking streams as delta.reasoning_content (as
// llama-server sends it), flushed before the content that follows it.
TEST(SseTest, ReasoningChunksBeforeContent) {
  SseEncoder enc({"id", "m", 1, RequestKind::kChat}, /*include_usage=*/false);
  std::string s = enc.Reasoning("thinking \xC3");  // a code point cut in two
  s += enc.Reasoning("\xA9");
  s += enc.Delta("answer");
  s += enc.Finish(FinishReason::kStop, Usage{});
  const auto frames = Frames(s);
  ASSERT_EQ(frames.size(), 6u) << s;  // role, 2 reasoning, content, finish, [DONE]
  std::string reasoning;
  for (int i : {1, 2}) {
    const json delta = json::parse(frames[i])["choices"][0]["delta"];
    EXPECT_FALSE(delta.contains("content")) << delta;
    reasoning += delta["reasoning_content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "thinking \xC3\xA9");
  const json content = json::parse(frames[3])["choices"][0]["delta"];
  EXPECT_EQ(content, json::parse(R"({"content":"answer"})"));
}

TEST(SseTest, ChatStreamShape) {
  SseEncoder enc({"id", "m", 1, RequestKind::kChat}, /*include_usage=*/true);
  std::string s = enc.Start();
  s += enc.Start();  // idempotent
  s += enc.Delta("ab\xE2\x82");  // euro sign split across deltas
  s += enc.Delta("\xAC!");
  Usage u;
  u.prompt_tokens = 4;
  u.completion_tokens = 2;
  s += enc.Finish(FinishReason::kStop, u);
  EXPECT_TRUE(enc.done());
  EXPECT_EQ(enc.Delta("late"), "");
  const auto frames = Frames(s);
  ASSERT_EQ(frames.size(), 6u);
  json role = json::parse(frames[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role["usage"].is_null());
  EXPECT_EQ(json::parse(frames[1])["choices"][0]["delta"]["content"], "ab");
  EXPECT_EQ(json::parse(frames[2])["choices"][0]["delta"]["content"], "€!");
  json fin = json::parse(frames[3]);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(fin["choices"][0]["delta"].empty());
  json usage = json::parse(frames[4]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
  EXPECT_EQ(frames[5], "[DONE]");
}

TEST(SseTest, CompletionStreamWithoutUsage) {
  SseEncoder enc({"id", "m", 1, RequestKind::kCompletion}, false);
  std::string s = enc.Start();  // (separate statements: operand order is unspecified)
  s += enc.Delta("x");
  s += enc.Finish(FinishReason::kLength, Usage{});
  const auto frames = Frames(s);
  ASSERT_EQ(frames.size(), 3u);  // no role chunk, no usage chunk
  json c = json::parse(frames[0]);
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["text"], "x");
  EXPECT_FALSE(c.contains("usage"));
  EXPECT_EQ(json::parse(frames[1])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(frames[2], "[DONE]");
}

TEST(SseTest, IncompleteTailFlushedAsReplacementAndErrorEndsStream) {
  SseEncoder enc({"id", "m", 1, RequestKind::kChat}, false);
  std::string s = enc.Delta("\xF0\x9F");
  const auto before = Frames(s);
  ASSERT_EQ(before.size(), 1u);  // the role chunk only: bytes held back
  s = enc.Finish(FinishReason::kStop, Usage{});
  EXPECT_EQ(json::parse(Frames(s)[0])["choices"][0]["delta"]["content"], "\xEF\xBF\xBD");

  SseEncoder err({"id", "m", 1, RequestKind::kChat}, false);
  std::string e = err.Delta("a");
  e += err.Error(ApiErrorFromStatus(Status::InvalidArgument("boom")));
  const auto frames = Frames(e);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(json::parse(frames[2])["error"]["message"], "boom");
  EXPECT_TRUE(err.done());
}

}  // namespace
}  // namespace agentkv::api
