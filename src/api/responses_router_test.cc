// POST /v1/responses through the Router (no sockets), FakeBackend behind it.

#include <gtest/gtest.h>

#include "api/api_test_util.h"
#include "api/fake_backend.h"
#include "api/router.h"

namespace agentkv::api {
namespace {

using namespace agentkv::api::testing;  // NOLINT

std::string ResponsesBody(const std::string& user, const std::string& extra = "") {
  return R"({"model":"gpt-5-codex","instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":")" +
         user + R"("}]}])" + extra + "}";
}

std::optional<std::string> Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return std::nullopt;
}

class ResponsesRouterTest : public ::testing::Test {
 protected:
  HttpResponse Post(const std::string& body, std::vector<std::pair<std::string, std::string>> headers = {}) {
    return router_.Handle(Req("POST", "/v1/responses", body, std::move(headers)));
  }
  FakeBackend backend_;
  Router router_{&backend_, ApiKeys()};
};

TEST_F(ResponsesRouterTest, NonStreamedResponse) {
  HttpResponse r = Post(ResponsesBody("hello", R"(,"max_output_tokens":64,"store":false)"));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(Header(r, "X-Request-Id"), j["id"].get<std::string>());
  EXPECT_EQ(j["model"], "gpt-5-codex");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["output"][0]["type"], "message");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Echo: hello");
  EXPECT_EQ(j["output_text"], "Echo: hello");
  EXPECT_EQ(j["usage"]["output_tokens"], 4);  // 11 bytes in 3-byte pieces
  EXPECT_EQ(j["usage"]["input_tokens"], backend_.CountPromptTokens(backend_.last_request()));
  EXPECT_EQ(j["max_output_tokens"], 64);
  GenerationRequest sent = backend_.last_request();
  ASSERT_EQ(sent.messages.size(), 2u);
  EXPECT_EQ(sent.messages[0].role, Role::kSystem);
  EXPECT_EQ(sent.sampling.max_tokens, 64);
}

TEST_F(ResponsesRouterTest, MaxOutputTokensIsIncomplete) {
  HttpResponse r = Post(ResponsesBody("a long question", R"(,"max_output_tokens":2)"));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Echo: ");  // two 3-byte pieces
}

TEST_F(ResponsesRouterTest, StreamedEventsEqualTheNonStreamedText) {
  const std::string user = "caf\xC3\xA9 au lait";
  const json plain = json::parse(Post(ResponsesBody(user)).body);
  HttpResponse r = Post(ResponsesBody(user, R"(,"stream":true)"), {{"X-Agent-Id", "fresh"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/event-stream");
  const std::string sse = Drain(r);
  std::string text;
  std::vector<std::string> names;
  json completed;
  size_t pos = 0;
  int64_t seq = 0;
  while ((pos = sse.find("event: ", pos)) != std::string::npos) {
    const size_t nl = sse.find('\n', pos);
    names.push_back(sse.substr(pos + 7, nl - pos - 7));
    const size_t end = sse.find("\n\n", nl);
    json d = json::parse(sse.substr(nl + 7, end - nl - 7));
    EXPECT_EQ(d["sequence_number"], seq++);
    if (names.back() == "response.output_text.delta") text += d["delta"].get<std::string>();
    if (names.back() == "response.completed") completed = d["response"];
    pos = end;
  }
  EXPECT_EQ(text, plain["output_text"]);
  ASSERT_GE(names.size(), 8u);
  EXPECT_EQ(names[0], "response.created");
  EXPECT_EQ(names[1], "response.in_progress");
  EXPECT_EQ(names[2], "response.output_item.added");
  EXPECT_EQ(names.back(), "response.completed");
  EXPECT_EQ(completed["output_text"], plain["output_text"]);
  EXPECT_EQ(completed["usage"]["agentkv"]["agent_id"], "fresh");
}

TEST_F(ResponsesRouterTest, ErrorsInOpenAIShape) {
  auto expect = [](const HttpResponse& r, int status, const std::string& param) {
    EXPECT_EQ(r.status, status) << r.body;
    json j = json::parse(r.body);
    EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
    EXPECT_EQ(j["error"]["type"], "invalid_request_error") << r.body;
    if (!param.empty()) EXPECT_EQ(j["error"]["param"], param) << r.body;
  };
  expect(Post("{nope"), 400, "");
  expect(Post(R"({"model":"m","input":"x","previous_response_id":"resp_1"})"), 400, "previous_response_id");
  expect(Post(R"({"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"u"}]}]})"), 400,
         "input[0].content[0].type");
  HttpResponse get = router_.Handle(Req("GET", "/v1/responses"));
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(Header(get, "Allow"), "POST");
  backend_.config().context_tokens = 50;
  HttpResponse too_long = Post(ResponsesBody(std::string(100, 'x')));
  EXPECT_EQ(too_long.status, 413) << too_long.body;
  EXPECT_EQ(json::parse(too_long.body)["error"]["param"], "input");
  EXPECT_EQ(backend_.submitted(), 0);
}

// Turn 1 through /v1/chat/completions, turn 2 (the same conversation, one
// more exchange) through /v1/responses: the same agent, its cache reused.
TEST_F(ResponsesRouterTest, OneAgentWhicheverApi) {
  const std::vector<std::pair<std::string, std::string>> id = {{"X-Agent-Id", "both"}};
  HttpResponse r = router_.Handle(
      Req("POST", "/v1/chat/completions",
          R"({"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"first"}]})",
          id));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<ChatMessage> turn1 = backend_.last_request().messages;
  r = Post(R"({"model":"gpt-5","instructions":"be brief","input":[{"role":"user","content":"first"},
             {"role":"assistant","content":[{"type":"output_text","text":"Echo: first"}]},
             {"role":"user","content":"second"}]})",
           id);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_GT(j["usage"]["input_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(j["usage"]["agentkv"]["agent_id"], "both");
  const std::vector<ChatMessage> turn2 = backend_.last_request().messages;
  ASSERT_EQ(turn2.size(), 4u);
  for (size_t i = 0; i < turn1.size(); ++i) {  // turn 1's messages are turn 2's prefix
    EXPECT_EQ(turn2[i].role, turn1[i].role);
    EXPECT_EQ(turn2[i].content, turn1[i].content);
  }
}

TEST_F(ResponsesRouterTest, CodexHeadersAndPromptCacheKeyNameTheAgent) {
  HttpResponse r = Post(ResponsesBody("x", R"(,"prompt_cache_key":"conv-1")"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(backend_.last_request().agent_id, "conv-1");
  EXPECT_EQ(Header(r, "X-Agent-Id"), "conv-1");
  r = Post(ResponsesBody("x", R"(,"prompt_cache_key":"conv-1")"), {{"session_id", "conv-1"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(backend_.last_request().agent_id, "conv-1");
  r = Post(ResponsesBody("x"), {{"thread-id", "child"}, {"x-codex-parent-thread-id", "conv-1"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(backend_.last_request().agent_id, "child");
  EXPECT_EQ(backend_.last_request().parent_agent_id, "conv-1");
}

// Codex CLI's requests (codex-rs ResponsesApiRequest, as it sends them to a
// custom provider): streamed, store false, reasoning echoed back encrypted,
// non-function tools among the functions, the conversation id both as
// prompt_cache_key and as the session_id header. Turn 2 reuses turn 1.
TEST_F(ResponsesRouterTest, CodexConversationStreamsAndStaysCached) {
  const std::string head = R"({"model":"gpt-5-codex","instructions":"You are Codex, a coding agent.",
    "tools":[{"type":"function","name":"shell","description":"Runs a shell command","strict":false,
              "parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},
                            "required":["command"],"additionalProperties":false}},
             {"type":"custom","name":"apply_patch","description":"Edit files","format":{"type":"grammar",
              "syntax":"lark","definition":"start: /.+/"}},
             {"type":"web_search"}],
    "tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"effort":"medium","summary":"auto"},
    "store":false,"stream":true,"include":["reasoning.encrypted_content"],
    "prompt_cache_key":"0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b","text":{"verbosity":"medium"},
    "input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>"}]},
             {"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>"}]},
             {"type":"message","role":"user","content":[{"type":"input_text","text":"list files"}]})";
  const std::vector<std::pair<std::string, std::string>> headers = {
      {"session_id", "0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"}, {"OpenAI-Beta", "responses=experimental"},
      {"originator", "codex_cli_rs"}};
  HttpResponse r = Post(head + "]}", headers);
  ASSERT_EQ(r.status, 200) << r.body;
  std::string sse = Drain(r);
  EXPECT_NE(sse.find("event: response.completed"), std::string::npos) << sse;
  ASSERT_EQ(backend_.last_request().tools.size(), 1u);
  EXPECT_EQ(backend_.last_request().agent_id, "0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b");
  r = Post(head + R"(,
      {"type":"reasoning","summary":[{"type":"summary_text","text":"I will list."}],"content":null,
       "encrypted_content":"gAAAAB..."},
      {"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_abc"},
      {"type":"function_call_output","call_id":"call_abc","output":"a.txt\nb.txt"},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Two files."}]},
      {"type":"message","role":"user","content":[{"type":"input_text","text":"thanks"}]}]})",
           headers);
  ASSERT_EQ(r.status, 200) << r.body;
  sse = Drain(r);
  const std::string prefix = "event: response.completed\ndata: ";
  const size_t done = sse.find(prefix);
  ASSERT_NE(done, std::string::npos) << sse;
  const size_t start = done + prefix.size();
  const json completed = json::parse(sse.substr(start, sse.find("\n\n", start) - start));
  EXPECT_GT(completed["response"]["usage"]["input_tokens_details"]["cached_tokens"], 0);
  const GenerationRequest sent = backend_.last_request();
  ASSERT_EQ(sent.messages.size(), 8u);
  EXPECT_EQ(sent.messages[4].reasoning_content, "I will list.");
  EXPECT_EQ(sent.messages[5].tool_name, "shell");
  EXPECT_EQ(sent.messages[6].content, "Two files.");
}

}  // namespace
}  // namespace agentkv::api
