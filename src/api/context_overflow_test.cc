// A prompt longer than the context, in tokens, gets each API's standard
// error (so that clients compact once instead of looping), streamed or not:
// OpenAI's 400 context_length_exceeded, Anthropic's 400 "prompt is too long:
// N tokens > M maximum". One too long in bytes stays a 413.

#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "api/api_test_util.h"
#include "api/fake_backend.h"
#include "api/router.h"

namespace agentkv::api {
namespace {

using testing::json;
using testing::Req;

// FakeBackend: a prompt's tokens = its bytes + 4 per message; its byte bound
// = the context's tokens. 48 bytes in one message: 52 tokens > a context of 50,
// within the byte bound.
constexpr int64_t kContext = 50;
const std::string kLong(48, 'x');

class ContextOverflowTest : public ::testing::TestWithParam<bool> {  // param: stream
 protected:
  ContextOverflowTest() : router_(&backend_, ApiKeys(), RouterOptions{}) { backend_.config().context_tokens = kContext; }
  std::string Stream() const { return GetParam() ? R"(,"stream":true)" : ""; }
  HttpResponse Post(const std::string& path, const std::string& body) {
    return router_.Handle(Req("POST", path, body, {{"Content-Type", "application/json"}}));
  }
  // The refusal comes before any event: a plain JSON body with its status.
  json ExpectPlainError(const HttpResponse& r, int status) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_FALSE(r.stream);
    EXPECT_EQ(r.content_type, "application/json");
    return json::parse(r.body);
  }
  void ExpectOpenAi(const HttpResponse& r, const std::string& param) {
    json j = ExpectPlainError(r, 400);
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["code"], "context_length_exceeded");
    EXPECT_EQ(j["error"]["param"], param);
    EXPECT_EQ(j["error"]["message"], "This model's maximum context length is 50 tokens. However, your " + param +
                                         " resulted in 52 tokens. Please reduce the length of the " + param + ".");
  }

  FakeBackend backend_;
  Router router_;
};

TEST_P(ContextOverflowTest, ChatCompletionsIs400ContextLengthExceeded) {
  ExpectOpenAi(Post("/v1/chat/completions",
                    R"({"model":"m","messages":[{"role":"user","content":")" + kLong + R"("}])" + Stream() + "}"),
               "messages");
}

TEST_P(ContextOverflowTest, CompletionsIs400ContextLengthExceeded) {
  // A bare prompt has no per-message tokens: 60 bytes (the byte bound) is 60 tokens, the whole context.
  backend_.config().context_tokens = 60;
  json j = ExpectPlainError(
      Post("/v1/completions", R"({"model":"m","prompt":")" + std::string(60, 'y') + R"(")" + Stream() + "}"), 400);
  EXPECT_EQ(j["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(j["error"]["param"], "prompt");
  EXPECT_EQ(j["error"]["message"], "This model's maximum context length is 60 tokens. However, your prompt "
                                   "resulted in 60 tokens. Please reduce the length of the prompt.");
}

TEST_P(ContextOverflowTest, ResponsesIs400ContextLengthExceeded) {
  ExpectOpenAi(Post("/v1/responses", R"({"model":"m","input":[{"role":"user","content":")" + kLong + R"("}])" +
                                         Stream() + "}"),
               "input");
}

TEST_P(ContextOverflowTest, MessagesIsAnthropicsPromptIsTooLong) {
  json j = ExpectPlainError(Post("/v1/messages", R"({"model":"m","max_tokens":16,"messages":[{"role":"user",)"
                                                 R"("content":")" + kLong + R"("}])" + Stream() + "}"),
                            400);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  // Anthropic's maximum is the longest prompt served: the context less one.
  const std::string message = j["error"]["message"];
  EXPECT_EQ(message, "prompt is too long: 52 tokens > 49 maximum");
  // What Claude Code matches to learn how much to compact.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(message, m, std::regex(R"(prompt is too long[^0-9]*(\d+)\s*tokens?\s*>\s*(\d+))")));
  EXPECT_EQ(m[1], "52");
  EXPECT_EQ(m[2], "49");
}

TEST_P(ContextOverflowTest, TooLongInBytesStays413) {
  const std::string huge(200, 'z');  // > 50 bytes: refused before any tokenization
  HttpResponse chat = Post("/v1/chat/completions",
                           R"({"model":"m","messages":[{"role":"user","content":")" + huge + R"("}])" + Stream() + "}");
  EXPECT_EQ(ExpectPlainError(chat, 413)["error"]["code"], "context_length_exceeded");
  HttpResponse messages = Post("/v1/messages", R"({"model":"m","max_tokens":16,"messages":[{"role":"user",)"
                                               R"("content":")" + huge + R"("}])" + Stream() + "}");
  EXPECT_EQ(ExpectPlainError(messages, 413)["error"]["type"], "request_too_large");
  EXPECT_EQ(backend_.submit_calls(), 0);
}

TEST_P(ContextOverflowTest, TheServerServesAfterwards) {
  ASSERT_EQ(Post("/v1/chat/completions",
                 R"({"model":"m","messages":[{"role":"user","content":")" + kLong + R"("}]})")
                .status,
            400);
  HttpResponse ok = Post("/v1/chat/completions", R"({"model":"m","messages":[{"role":"user","content":"hi"}])" +
                                                     Stream() + "}");
  EXPECT_EQ(ok.status, 200) << ok.body;
  testing::Drain(ok);
}

INSTANTIATE_TEST_SUITE_P(StreamOrNot, ContextOverflowTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Stream" : "NoStream"; });

}  // namespace
}  // namespace agentkv::api
