#include "api/anthropic_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/anthropic_sse.h"

namespace agentkv::api {
namespace {

using nlohmann::json;

ParseContext Ctx() {
  ParseContext c;
  c.model_id = "served";
  return c;
}

std::optional<ApiError> Parse(const std::string& body, GenerationRequest* out = nullptr) {
  GenerationRequest r;
  std::string model;
  return ParseMessagesRequest(body, Ctx(), out ? out : &r, &model);
}

// A valid request with `extra` (",\"k\":v") spliced in.
std::string With(const std::string& extra) {
  return R"({"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}])" + extra +
         "}";
}

TEST(AnthropicJsonTest, ParsesSystemMessagesAndSampling) {
  GenerationRequest r;
  std::string model;
  auto e = ParseMessagesRequest(
      R"({"model":"claude-x","max_tokens":32,
          "system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}},{"type":"text","text":"and kind"}],
          "messages":[{"role":"user","content":"q1"},
                      {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"a1"}]},
                      {"role":"user","content":[{"type":"text","text":"q2"},{"type":"text","text":"more"}]}],
          "stop_sequences":["END","\n\n"],"temperature":0.5,"top_p":0.9,"top_k":40,"stream":true,
          "metadata":{"user_id":"u1"},"thinking":{"type":"disabled"}})",
      Ctx(), &r, &model);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(model, "claude-x");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, Role::kSystem);
  EXPECT_EQ(r.messages[0].content, "be brief\nand kind");
  EXPECT_EQ(r.messages[1].content, "q1");
  EXPECT_EQ(r.messages[2].role, Role::kAssistant);
  EXPECT_EQ(r.messages[2].content, "a1");  // thinking dropped
  EXPECT_EQ(r.messages[3].content, "q2\nmore");
  EXPECT_EQ(r.sampling.max_tokens, 32);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.kind, RequestKind::kChat);
}

// Claude Code's first request carries a system message inside `messages`
// (issue 30): it is accepted and kept in place, after the top-level system.
TEST(AnthropicJsonTest, SystemMessagesInsideMessagesStayInPlace) {
  GenerationRequest r;
  auto e = Parse(R"({"model":"m","max_tokens":4,"system":"top",
                     "messages":[{"role":"user","content":"q1"},
                                 {"role":"system","content":[{"type":"text","text":"reminder"},{"type":"text","text":"two"}]},
                                 {"role":"user","content":"q2"},{"role":"system","content":"last"}]})",
                 &r);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0].role, Role::kSystem);
  EXPECT_EQ(r.messages[0].content, "top");
  EXPECT_EQ(r.messages[1].content, "q1");
  EXPECT_EQ(r.messages[2].role, Role::kSystem);
  EXPECT_EQ(r.messages[2].content, "reminder\ntwo");
  EXPECT_EQ(r.messages[3].role, Role::kUser);
  EXPECT_EQ(r.messages[4].role, Role::kSystem);
  EXPECT_EQ(r.messages[4].content, "last");
}

TEST(AnthropicJsonTest, RefusesBadRequestsNamingTheField) {
  struct Case {
    std::string body;
    std::string param;
  };
  const Case cases[] = {
      {"{", ""},
      {"[]", ""},
      {R"({"max_tokens":16,"messages":[{"role":"user","content":"hi"}]})", "model"},
      {R"({"model":"m","messages":[{"role":"user","content":"hi"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":1.5,"messages":[{"role":"user","content":"hi"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":4,"messages":[]})", "messages"},
      {R"({"model":"m","max_tokens":4})", "messages"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"wizard","content":"x"}]})", "messages.0.role"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"system"}]})", "messages.0.content"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"system","content":[{"type":"image"}]}]})",
       "messages.0.content.0.type"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"user"}]})", "messages.0.content"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})",
       "messages.0.content.0.type"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text"}]}]})",
       "messages.0.content.0.text"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"pre"}]})",
       "messages.1"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]})",
       "messages.0.content.0.tool_use_id"},
      {With(R"(,"temperature":1.5)"), "temperature"},
      {With(R"(,"top_p":0)"), "top_p"},
      {With(R"(,"top_k":-1)"), "top_k"},
      {With(R"(,"stop_sequences":"END")"), "stop_sequences"},
      {With(R"(,"stop_sequences":[""])"), "stop_sequences"},
      {With(R"(,"system":[{"type":"image"}])"), "system.0.type"},
      {With(R"(,"system":5)"), "system"},
      {With(R"(,"stream":"yes")"), "stream"},
      {With(R"(,"metadata":{"user_id":5})"), "metadata.user_id"},
      {With(R"(,"tools":[{"name":"f"}])"), "tools.0.input_schema"},
      {With(R"(,"tool_choice":{"type":"any"})"), "tool_choice"},
      {With(R"(,"mcp_servers":[{"type":"url","url":"http://x","name":"x"}])"), "mcp_servers"},
      {With(R"(,"agent_id":"../x")"), "agent_id"},
  };
  for (const Case& c : cases) {
    auto e = Parse(c.body);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->http_status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body << " -> " << e->message;
  }
  EXPECT_FALSE(Parse(With(R"(,"tools":[],"tool_choice":{"type":"none"},"metadata":{"user_id":null})")));
}

TEST(AnthropicJsonTest, StrictModelNameIs404) {
  ParseContext ctx = Ctx();
  GenerationRequest r;
  std::string model;
  EXPECT_FALSE(ParseMessagesRequest(With(""), ctx, &r, &model));  // any name by default
  ctx.strict_model_name = true;
  auto e = ParseMessagesRequest(With(""), ctx, &r, &model);
  ASSERT_TRUE(e);
  EXPECT_EQ(AnthropicError(*e).type, "not_found_error");
  EXPECT_EQ(AnthropicError(*e).http_status, 404);
}

Usage SomeUsage() {
  Usage u;
  u.prompt_tokens = 100;
  u.cached_tokens = 60;
  u.completion_tokens = 7;
  u.agent_id = "a1";
  return u;
}

TEST(AnthropicJsonTest, MessageShape) {
  Usage u = SomeUsage();
  json j = json::parse(AnthropicMessageJson({"msg_1", "claude-x"}, "", "Hello", {}, FinishReason::kStop, u));
  EXPECT_EQ(j["id"], "msg_1");
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_EQ(j["model"], "claude-x");
  EXPECT_EQ(j["content"], json::parse(R"([{"type":"text","text":"Hello"}])"));
  EXPECT_EQ(j["stop_reason"], "end_turn");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  EXPECT_EQ(j["usage"]["input_tokens"], 40);
  EXPECT_EQ(j["usage"]["cache_read_input_tokens"], 60);
  EXPECT_EQ(j["usage"]["cache_creation_input_tokens"], 0);
  EXPECT_EQ(j["usage"]["output_tokens"], 7);
  EXPECT_EQ(j["usage"]["agentkv"]["agent_id"], "a1");
  u.stop_sequence = "END";
  j = json::parse(AnthropicMessageJson({"msg_1", "m"}, "", "", {}, FinishReason::kStop, u));
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], "END");
  j = json::parse(AnthropicMessageJson({"msg_1", "m"}, "", "", {}, FinishReason::kLength, SomeUsage()));
  EXPECT_EQ(j["stop_reason"], "max_tokens");
}

// Splits "event: X\ndata: {...}\n\n" frames into (name, data) pairs.
std::vector<std::pair<std::string, json>> Events(const std::string& sse) {
  std::vector<std::pair<std::string, json>> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    const std::string frame = sse.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = frame.find('\n');
    EXPECT_EQ(frame.rfind("event: ", 0), 0u) << frame;
    EXPECT_EQ(frame.compare(nl + 1, 6, "data: "), 0) << frame;
    json data = json::parse(frame.substr(nl + 7));
    const std::string name = frame.substr(7, nl - 7);
    EXPECT_EQ(data["type"], name) << frame;  // Anthropic: event name == data.type
    out.emplace_back(name, data);
  }
  return out;
}

// With thinking enabled the model's thinking is a thinking block (deltas,
// then an empty signature_delta before its stop); without, it is dropped.
TEST(AnthropicSseTest, ThinkingBlockOnlyWhenEnabled) {
  for (bool enabled : {true, false}) {
    AnthropicSseEncoder enc({"msg_9", "m", enabled});
    std::string sse = enc.Start(Usage{});
    sse += enc.Reasoning("hmm ");
    sse += enc.Reasoning("ok");
    sse += enc.Delta("Hi");
    sse += enc.Finish(FinishReason::kStop, SomeUsage());
    std::vector<std::string> kinds;
    std::string thinking;
    for (auto& [n, d] : Events(sse)) {
      if (n == "content_block_start") kinds.push_back("start:" + d["content_block"]["type"].get<std::string>());
      if (n == "content_block_delta") kinds.push_back(d["delta"]["type"].get<std::string>());
      if (n == "content_block_stop") kinds.push_back("stop");
      if (n == "content_block_delta" && d["delta"]["type"] == "thinking_delta") {
        thinking += d["delta"]["thinking"].get<std::string>();
      }
    }
    if (enabled) {
      EXPECT_EQ(kinds, (std::vector<std::string>{"start:thinking", "thinking_delta", "thinking_delta",
                                                 "signature_delta", "stop", "start:text", "text_delta", "stop"}));
      EXPECT_EQ(thinking, "hmm ok");
    } else {
      EXPECT_EQ(kinds, (std::vector<std::string>{"start:text", "text_delta", "stop"}));
    }
  }
  const json j = json::parse(AnthropicMessageJson({"msg_1", "m", true}, "hmm", "Hi", {}, FinishReason::kStop, SomeUsage()));
  EXPECT_EQ(j["content"], json::parse(R"([{"type":"thinking","thinking":"hmm","signature":""},{"type":"text","text":"Hi"}])"));
  const json off = json::parse(AnthropicMessageJson({"msg_1", "m"}, "hmm", "Hi", {}, FinishReason::kStop, SomeUsage()));
  EXPECT_EQ(off["content"], json::parse(R"([{"type":"text","text":"Hi"}])"));
}

TEST(AnthropicSseTest, EventSequenceAsAnthropicSendsIt) {
  AnthropicSseEncoder enc({"msg_9", "claude-x"});
  Usage prompt = SomeUsage();
  prompt.completion_tokens = 0;
  std::string sse = enc.Start(prompt);
  sse += enc.Start(prompt);          // idempotent
  sse += enc.Delta("He");
  sse += enc.Delta("llo \xC3");      // a code point cut in two
  sse += enc.Delta("\xA9!");
  Usage done = SomeUsage();
  done.stop_sequence = "END";
  sse += enc.Finish(FinishReason::kStop, done);
  EXPECT_TRUE(enc.done());
  EXPECT_EQ(enc.Delta("late"), "");
  auto ev = Events(sse);
  std::vector<std::string> names;
  std::string text;
  for (auto& [n, d] : ev) {
    names.push_back(n);
    if (n == "content_block_delta") {
      EXPECT_EQ(d["index"], 0);
      EXPECT_EQ(d["delta"]["type"], "text_delta");
      text += d["delta"]["text"].get<std::string>();
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"message_start", "content_block_start", "ping", "content_block_delta",
                                             "content_block_delta", "content_block_delta", "content_block_stop",
                                             "message_delta", "message_stop"}));
  EXPECT_EQ(text, "Hello \xC3\xA9!");
  const json& start = ev[0].second["message"];
  EXPECT_EQ(start["id"], "msg_9");
  EXPECT_EQ(start["content"], json::array());
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(start["usage"]["input_tokens"], 40);
  EXPECT_EQ(start["usage"]["cache_read_input_tokens"], 60);
  EXPECT_EQ(ev[1].second["content_block"], json::parse(R"({"type":"text","text":""})"));
  const json& delta = ev[7].second;
  EXPECT_EQ(delta["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(delta["delta"]["stop_sequence"], "END");
  EXPECT_EQ(delta["usage"]["output_tokens"], 7);
  EXPECT_EQ(delta["usage"]["cache_read_input_tokens"], 60);
}

TEST(AnthropicSseTest, ErrorEndsTheStream) {
  AnthropicSseEncoder enc({"msg_9", "m"});
  std::string sse = enc.Start(Usage{});
  sse += enc.Error(ApiErrorFromStatus(Status::Unavailable("shutting down")));
  EXPECT_TRUE(enc.done());
  auto ev = Events(sse);
  ASSERT_EQ(ev.back().first, "error");
  EXPECT_EQ(ev.back().second["error"]["type"], "overloaded_error");
  EXPECT_EQ(ev.back().second["error"]["message"], "shutting down");
}

TEST(AnthropicJsonTest, ErrorMapping) {
  struct Case {
    ApiError in;
    int status;
    const char* type;
  };
  ApiError ctx_error = ApiErrorFromStatus(Status::OutOfRange("long").WithQuantity({900, 512}), "messages");
  ApiError body_error = InvalidRequest("too big", "", "request_too_large");
  body_error.http_status = 413;
  ApiError unauthorized = InvalidRequest("bad key", "", "invalid_api_key");
  unauthorized.http_status = 401;
  const Case cases[] = {
      {InvalidRequest("x", "p"), 400, "invalid_request_error"},
      {unauthorized, 401, "authentication_error"},
      {ApiErrorFromStatus(Status::NotFound("x")), 404, "not_found_error"},
      {ApiErrorFromStatus(Status::FailedPrecondition("busy")), 409, "invalid_request_error"},
      {ctx_error, 400, "invalid_request_error"},
      {body_error, 413, "request_too_large"},
      {ApiErrorFromStatus(Status::ResourceExhausted("x")), 429, "rate_limit_error"},
      {ApiErrorFromStatus(Status::Unavailable("x")), 529, "overloaded_error"},
      {ApiErrorFromStatus(Status::Internal("x")), 500, "api_error"},
  };
  for (const Case& c : cases) {
    ApiError e = AnthropicError(c.in);
    EXPECT_EQ(e.http_status, c.status) << c.in.message;
    EXPECT_EQ(e.type, c.type) << c.in.message;
    json j = json::parse(AnthropicErrorJson(e));
    EXPECT_EQ(j["type"], "error");
    EXPECT_EQ(j["error"]["type"], c.type);
    EXPECT_TRUE(j["error"]["message"].is_string());
  }
  EXPECT_EQ(AnthropicError(ctx_error).message, "prompt is too long: 900 tokens > 511 maximum");
  EXPECT_EQ(AnthropicError(ApiErrorFromStatus(Status::Unavailable("x"))).retry_after_s, 1);
}

}  // namespace
}  // namespace agentkv::api
