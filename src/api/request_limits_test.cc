// Issue 29, findings 1 and 7: nesting depth and memory admitted before the
// parse, through the Router (no sockets), both APIs.

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
  const json body = {
      {"model", "fake-model"},
      {"messages",
       {{{"role", "user"}, {"content", "hi"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", NestedObject(kDeep)}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "ok"}}}}};
  const HttpResponse r = Post("/v1/chat/completions", body.dump());
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
  const json body = {
      {"model", "fake-model"},
      {"messages",
       {{{"role", "user"}, {"content", "hi"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls", {{{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", args.dump()}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "ok"}}}}};
  EXPECT_EQ(Post("/v1/chat/completions", body.dump()).status, 200);
}

}  // namespace
}  // namespace agentkv::api
