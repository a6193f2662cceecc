// POST /v1/messages through the Router (no sockets), FakeBackend behind it.

#include <gtest/gtest.h>

#include "api/api_test_util.h"
#include "api/fake_backend.h"
#include "api/router.h"

namespace agentkv::api {
namespace {

using namespace agentkv::api::testing;  // NOLINT

std::string MessagesBody(const std::string& user, const std::string& extra = "") {
  return R"({"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":")" + user + R"("}])" +
         extra + "}";
}

std::optional<std::string> Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return std::nullopt;
}

// Anthropic's error shape, nothing of OpenAI's.
void ExpectAnthropicError(const HttpResponse& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body;
  ASSERT_FALSE(r.stream);
  json j = json::parse(r.body);
  EXPECT_EQ(j["type"], "error") << r.body;
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_FALSE(j["error"].contains("code")) << r.body;
}

class AnthropicRouterTest : public ::testing::Test {
 protected:
  HttpResponse Post(const std::string& body, std::vector<std::pair<std::string, std::string>> headers = {}) {
    return router_.Handle(Req("POST", "/v1/messages", body, std::move(headers)));
  }
  FakeBackend backend_;
  Router router_{&backend_, ApiKeys()};
};

TEST_F(AnthropicRouterTest, NonStreamedMessage) {
  HttpResponse r = Post(MessagesBody("hello", R"(,"system":"be brief")"), {{"anthropic-version", "2023-06-01"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["model"], "claude-sonnet-4-5");  // echoed as sent
  EXPECT_EQ(j["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(j["content"][0]["text"], "Echo: hello");
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_EQ(j["usage"]["output_tokens"], 4);  // 11 bytes in 3-byte pieces
  EXPECT_EQ(Header(r, "request-id"), j["id"].get<std::string>());
  GenerationRequest sent = backend_.last_request();
  ASSERT_EQ(sent.messages.size(), 2u);
  EXPECT_EQ(sent.messages[0].role, Role::kSystem);
  EXPECT_EQ(sent.sampling.max_tokens, 64);
}

TEST_F(AnthropicRouterTest, StopSequenceReported) {
  HttpResponse r = Post(MessagesBody("one STOP two", R"(,"stop_sequences":["STOP"])"));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["content"][0]["text"], "Echo: one ");
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], "STOP");
}

TEST_F(AnthropicRouterTest, StreamedEventsEqualTheNonStreamedText) {
  const std::string user = "caf\xC3\xA9 au lait";
  const std::string plain = json::parse(Post(MessagesBody(user)).body)["content"][0]["text"];
  HttpResponse r = Post(MessagesBody(user, R"(,"stream":true)"), {{"X-Agent-Id", "fresh"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/event-stream");
  const std::string sse = Drain(r);
  std::string text;
  std::vector<std::string> names;
  size_t pos = 0;
  while ((pos = sse.find("event: ", pos)) != std::string::npos) {
    const size_t nl = sse.find('\n', pos);
    names.push_back(sse.substr(pos + 7, nl - pos - 7));
    const size_t end = sse.find("\n\n", nl);
    json d = json::parse(sse.substr(nl + 7, end - nl - 7));
    if (names.back() == "content_block_delta") text += d["delta"]["text"].get<std::string>();
    if (names.back() == "message_start") EXPECT_EQ(d["message"]["usage"]["input_tokens"], backend_.CountPromptTokens(backend_.last_request()));
    pos = end;
  }
  EXPECT_EQ(text, plain);
  ASSERT_GE(names.size(), 6u);
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names[1], "content_block_start");
  EXPECT_EQ(names[2], "ping");
  EXPECT_EQ(names[names.size() - 3], "content_block_stop");
  EXPECT_EQ(names[names.size() - 2], "message_delta");
  EXPECT_EQ(names.back(), "message_stop");
}

TEST_F(AnthropicRouterTest, ErrorsInAnthropicShape) {
  ExpectAnthropicError(Post("{nope"), 400, "invalid_request_error");
  ExpectAnthropicError(Post(R"({"model":"m","messages":[{"role":"user","content":"x"}]})"), 400,
                       "invalid_request_error");
  ExpectAnthropicError(router_.Handle(Req("GET", "/v1/messages")), 405, "invalid_request_error");
  backend_.set_ready(false);
  HttpResponse loading = Post(MessagesBody("x"));
  ExpectAnthropicError(loading, 529, "overloaded_error");
  EXPECT_EQ(Header(loading, "Retry-After"), "1");
  backend_.set_ready(true);
  backend_.config().context_tokens = 50;
  // Too long in tokens: Anthropic's words (context_overflow_test.cc has the numbers).
  HttpResponse too_long = Post(MessagesBody(std::string(48, 'x')));
  ExpectAnthropicError(too_long, 400, "invalid_request_error");
  EXPECT_EQ(json::parse(too_long.body)["error"]["message"].get<std::string>().rfind("prompt is too long: ", 0), 0u);
  // Too long in bytes, refused before any tokenization: Anthropic's 413.
  ExpectAnthropicError(Post(MessagesBody(std::string(100, 'x'))), 413, "request_too_large");
  EXPECT_EQ(backend_.submitted(), 0);
}

TEST_F(AnthropicRouterTest, XApiKeyAuthenticatesAsTheSameTenant) {
  auto keys = ApiKeys::Parse({"team:secret"}, "");
  ASSERT_TRUE(keys.ok());
  Router router(&backend_, *keys);
  HttpResponse r = router.Handle(Req("POST", "/v1/messages", MessagesBody("hi"), {{"x-api-key", "wrong"}}));
  ExpectAnthropicError(r, 401, "authentication_error");
  ExpectAnthropicError(router.Handle(Req("POST", "/v1/messages", MessagesBody("hi"))), 401, "authentication_error");
  r = router.Handle(Req("POST", "/v1/messages", MessagesBody("hi"), {{"x-api-key", "secret"}}));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(backend_.last_request().namespace_id, "team");
  // The OpenAI routes take it too (one key, one tenant, whichever API).
  r = router.Handle(Req("GET", "/v1/agents", "", {{"x-api-key", "secret"}}));
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(AnthropicRouterTest, OneAgentWhicheverApi) {
  const std::vector<std::pair<std::string, std::string>> id = {{"X-Agent-Id", "both"}};
  HttpResponse r = router_.Handle(Req(
      "POST", "/v1/chat/completions", R"({"model":"gpt-4o","messages":[{"role":"user","content":"first"}]})", id));
  ASSERT_EQ(r.status, 200) << r.body;
  r = Post(MessagesBody("first second"), id);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_GT(j["usage"]["cache_read_input_tokens"], 0);
  EXPECT_EQ(j["usage"]["agentkv"]["agent_id"], "both");
}

TEST_F(AnthropicRouterTest, ClaudeCodeHeadersNameTheAgentAndItsParent) {
  HttpResponse r = Post(MessagesBody("x"), {{"X-Claude-Code-Session-Id", "0c1d-session"},
                                            {"x-claude-code-agent-id", "agent7"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(backend_.last_request().agent_id, "0c1d-session.agent7");
  EXPECT_EQ(backend_.last_request().parent_agent_id, "0c1d-session");
  EXPECT_EQ(Header(r, "X-Agent-Id"), "0c1d-session.agent7");
}

TEST_F(AnthropicRouterTest, ModelsListInEitherShapeWithAliases) {
  RouterOptions o;
  o.listed_model_aliases = {"claude-sonnet-4-5", "gpt-4o"};
  Router router(&backend_, ApiKeys(), o);
  json openai = json::parse(router.Handle(Req("GET", "/v1/models")).body);
  ASSERT_EQ(openai["data"].size(), 3u);
  EXPECT_EQ(openai["data"][0]["id"], "fake-model");
  EXPECT_EQ(openai["data"][1]["id"], "claude-sonnet-4-5");
  json anthropic =
      json::parse(router.Handle(Req("GET", "/v1/models", "", {{"anthropic-version", "2023-06-01"}})).body);
  ASSERT_EQ(anthropic["data"].size(), 3u);
  EXPECT_EQ(anthropic["data"][0]["type"], "model");
  EXPECT_EQ(anthropic["data"][2]["id"], "gpt-4o");
  EXPECT_EQ(anthropic["has_more"], false);
  EXPECT_EQ(anthropic["first_id"], "fake-model");
}

}  // namespace
}  // namespace agentkv::api
