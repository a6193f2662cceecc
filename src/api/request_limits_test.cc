// Issue 29, findings 1 and 7: nesting depth and memory admitted before the
// parse, through the Router (no sockets), both APIs.

#include <new>

#include <gtest/gtest.h>

#include "api/api_test_util.h"
#include "api/fake_backend.h"
#include "api/router.h"
#include "util/json_depth.h"

namespace agentkv::api {
namespace {

using namespace agentkv::api::testing;  // NOLINT

// Far past any stack: dump() and the schema/template walks recurse per level
// and crashed the server at 40,000 levels.
constexpr size_t kDeep = 200000;

// `levels` nested objects {"a":{"a":...{}}} (JSON text, depth `levels`).
std::string NestedObject(size_t levels) {
  std::string s;
  s.reserve(levels * 6 + 2);
  for (size_t i = 1; i < levels; ++i) s += "{\"a\":";
  s += "{}";
  s.append(levels - 1, '}');
  return s;
}

std::string ChatBody(const std::string& extra, const std::string& user = "hi") {
  return R"({"model":"fake-model","messages":[{"role":"user","content":")" + user + R"("}])" + extra + "}";
}

std::string MessagesBody(const std::string& extra, const std::string& messages = R"([{"role":"user","content":"hi"}])") {
  return R"({"model":"claude-sonnet-4-5","max_tokens":16,"messages":)" + messages + extra + "}";
}

// A chat body whose assistant turn calls f(`arguments`) as `call_id`, and
// the tool's answer to it.
std::string ToolCallChatBody(const std::string& call_id, const std::string& arguments) {
  const json body = {
      {"model", "fake-model"},
      {"messages",
       {{{"role", "user"}, {"content", "hi"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", call_id}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", arguments}}}}}}},
        {{"role", "tool"}, {"tool_call_id", call_id}, {"content", "ok"}}}}};
  return body.dump();
}

void ExpectTooDeep(const HttpResponse& r) {
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  json j = json::parse(r.body);
  const std::string message = j["error"]["message"];
  EXPECT_NE(message.find(std::to_string(kMaxJsonDepth)), std::string::npos) << message;  // names the limit
}

class RequestLimitsTest : public ::testing::Test {
 protected:
  HttpResponse Post(const std::string& path, const std::string& body) {
    return router_.Handle(Req("POST", path, body));
  }
  FakeBackend backend_;
  Router router_{&backend_, ApiKeys()};
};

TEST_F(RequestLimitsTest, DeepToolParametersAre400) {
  ExpectTooDeep(Post("/v1/chat/completions",
                     ChatBody(R"(,"tools":[{"type":"function","function":{"name":"f","parameters":)" +
                              NestedObject(kDeep) + "}}]")));
  EXPECT_EQ(backend_.submit_calls(), 0);
}

TEST_F(RequestLimitsTest, DeepResponseFormatSchemaIs400) {
  ExpectTooDeep(Post("/v1/chat/completions",
                     ChatBody(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":)" +
                              NestedObject(kDeep) + "}}")));
}

TEST_F(RequestLimitsTest, DeepAnthropicInputSchemaIs400) {
  const HttpResponse r =
      Post("/v1/messages", MessagesBody(R"(,"tools":[{"name":"f","input_schema":)" + NestedObject(kDeep) + "}]"));
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find(std::to_string(kMaxJsonDepth)), std::string::npos) << r.body;
  EXPECT_EQ(json::parse(r.body)["type"], "error");  // Anthropic's shape
}

TEST_F(RequestLimitsTest, DeepAnthropicToolUseInputIs400) {
  const std::string messages = R"([{"role":"user","content":"hi"},{"role":"assistant","content":[)"
                               R"({"type":"tool_use","id":"toolu_1","name":"f","input":)" +
                               NestedObject(kDeep) +
                               R"(}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}])";
  const HttpResponse r = Post("/v1/messages", MessagesBody("", messages));
  EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find(std::to_string(kMaxJsonDepth)), std::string::npos) << r.body;
}

// The body is shallow; the JSON inside the arguments string is not (the
// chat layer parses it again, recursively).
TEST_F(RequestLimitsTest, DeepToolCallArgumentsStringIs400) {
  const HttpResponse r = Post("/v1/chat/completions", ToolCallChatBody("call_1", NestedObject(kDeep)));
  ExpectTooDeep(r);
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(backend_.submit_calls(), 0);
}

// nlohmann's parser is iterative, so depth in a field nobody reads was
// harmless; it is refused all the same (one rule for the whole body).
TEST_F(RequestLimitsTest, DepthIsBoundedAnywhereInTheBody) {
  ExpectTooDeep(Post("/v1/chat/completions", ChatBody(R"(,"unknown":)" + NestedObject(1000000))));
  ExpectTooDeep(Post("/v1/completions", R"({"prompt":"x","x":)" + NestedObject(kMaxJsonDepth) + "}"));
  // The body's own braces count: kMaxJsonDepth in all is accepted.
  EXPECT_EQ(Post("/v1/completions", R"({"prompt":"x","x":)" + NestedObject(kMaxJsonDepth - 1) + "}").status, 200);
  const json args = json::parse(NestedObject(kMaxJsonDepth));
  EXPECT_EQ(Post("/v1/chat/completions", ToolCallChatBody("c", args.dump())).status, 200);
}

// Issue 29, finding 7: a body that does not fit in the bytes being parsed at
// once is 503 + Retry-After before its parse; it fits again once the others
// are done.
TEST(RequestMemoryTest, BodiesBeyondTheParseBudgetAre503) {
  FakeBackend backend;
  RouterOptions options;
  options.parse_budget = std::make_shared<ParseBudget>(size_t{1} << 20);
  Router router(&backend, ApiKeys(), options);
  const std::string big = ChatBody(R"(,"pad":")" + std::string(size_t{600} << 10, 'x') + "\"");
  std::shared_ptr<void> other = options.parse_budget->Acquire(size_t{600} << 10);  // another request parsing
  HttpResponse r = router.Handle(Req("POST", "/v1/chat/completions", big));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "service_unavailable");
  bool retry_after = false;
  for (const auto& [k, v] : r.headers) retry_after = retry_after || k == "Retry-After";
  EXPECT_TRUE(retry_after);
  EXPECT_EQ(router.Handle(Req("POST", "/v1/chat/completions", ChatBody(""))).status, 200);  // small: served
  other.reset();
  EXPECT_EQ(router.Handle(Req("POST", "/v1/chat/completions", big)).status, 200);
  EXPECT_EQ(options.parse_budget->in_use(), 0u);  // released after the parse
}

// The tenant's ticket is taken before the parse: a tenant at its cap costs
// no parse (429, even for a body that would be a 400).
TEST(RequestMemoryTest, TenantCapIsCheckedBeforeTheParse) {
  FakeBackend backend;
  backend.config().delay_ms = 20;
  RouterOptions options;
  options.max_requests_per_tenant = 1;
  Router router(&backend, ApiKeys(), options);
  HttpResponse a =
      router.Handle(Req("POST", "/v1/chat/completions", ChatBody(R"(,"stream":true)", "a long enough message")));
  ASSERT_EQ(a.status, 200);
  ASSERT_TRUE(a.stream);
  EXPECT_EQ(router.Handle(Req("POST", "/v1/chat/completions", "{not json")).status, 429);
}

// 25 MB of tool descriptions took 69 s of template and tokenizer work before
// the 413: the tools' bytes count toward the prompt bound, checked before
// anything renders.
TEST(RequestMemoryTest, ToolTextBeyondTheContextIs413BeforeSubmit) {
  FakeBackend backend;
  backend.config().context_tokens = 4096;
  Router router(&backend, ApiKeys());
  json tools = json::array();
  for (int i = 0; i < 4; ++i) {
    tools.push_back({{"type", "function"},
                     {"function", {{"name", "f" + std::to_string(i)}, {"description", std::string(2000, 'd')}}}});
  }
  const json body = {{"model", "fake-model"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"tools", tools}};
  HttpResponse r = router.Handle(Req("POST", "/v1/chat/completions", body.dump()));
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(backend.submit_calls(), 0);
}

// A backend whose Submit runs out of memory.
class OutOfMemoryBackend final : public Backend {
 public:
  std::string ModelId() const override { return fake_.ModelId(); }
  bool IsReady() const override { return true; }
  int64_t ContextTokens() const override { return fake_.ContextTokens(); }
  int64_t MaxPromptBytes() const override { return fake_.MaxPromptBytes(); }
  Status Submit(GenerationRequest, std::shared_ptr<GenerationSink>) override { throw std::bad_alloc(); }
  Result<std::vector<AgentInfo>> ListAgents(const std::string& ns) override { return fake_.ListAgents(ns); }
  Result<AgentInfo> GetAgent(const std::string& ns, const std::string& id) override { return fake_.GetAgent(ns, id); }
  Status DeleteAgent(const std::string& ns, const std::string& id, bool evict_only) override {
    return fake_.DeleteAgent(ns, id, evict_only);
  }
  std::string MetricsText() const override { return ""; }

 private:
  FakeBackend fake_;
};

TEST(RequestMemoryTest, BadAllocIs503NotACrash) {
  OutOfMemoryBackend backend;
  Router router(&backend, ApiKeys());
  HttpResponse r = router.Handle(Req("POST", "/v1/chat/completions", ChatBody("")));
  EXPECT_EQ(r.status, 503) << r.body;
  r = router.Handle(Req("POST", "/v1/messages", MessagesBody("")));
  EXPECT_EQ(r.status, 529) << r.body;  // Anthropic's 503: overloaded
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "overloaded_error");
}

}  // namespace
}  // namespace agentkv::api
