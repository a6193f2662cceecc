#include "api/openai_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace agentkv::api {
namespace {

using nlohmann::json;

ParseContext Ctx() {
  ParseContext c;
  c.model_id = "m";
  c.model_aliases = {"alias"};
  c.strict_model_name = true;
  return c;
}

std::optional<ApiError> Chat(const std::string& body, GenerationRequest* out = nullptr,
                             ParseContext ctx = Ctx()) {
  GenerationRequest r;
  auto e = ParseChatRequest(body, ctx, out ? out : &r);
  return e;
}

const char* kMsgs = R"("messages":[{"role":"user","content":"hi"}])";
std::string With(const std::string& extra) { return std::string("{") + kMsgs + extra + "}"; }

TEST(OpenAiJsonTest, ParsesFullChatRequest) {
  GenerationRequest r;
  auto e = Chat(R"({"model":"m","messages":[{"role":"system","content":"s"},
      {"role":"developer","content":"d"},{"role":"user","content":[{"type":"text","text":"a"},
      {"type":"text","text":"b"}]},{"role":"assistant","content":null}],
      "max_completion_tokens":7,"temperature":0,"top_p":0.5,"top_k":40,"seed":-3,
      "stop":["x","y"],"stream":true,"stream_options":{"include_usage":true},
      "agent_id":"a1","user":"ignored","presence_penalty":0.5})",
                &r);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[1].role, Role::kSystem);
  EXPECT_EQ(r.messages[2].content, "a\nb");
  EXPECT_EQ(r.messages[3].content, "");
  EXPECT_EQ(*r.sampling.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(*r.sampling.seed, -3);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.agent_id, "a1");
}

TEST(OpenAiJsonTest, DefaultsAndAliases) {
  GenerationRequest r;
  ASSERT_FALSE(Chat(With(R"(,"model":"alias","max_tokens":3,"stop":"END","seed":null)"), &r));
  EXPECT_EQ(*r.sampling.max_tokens, 3);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
  EXPECT_FALSE(r.sampling.seed);
  EXPECT_FALSE(r.stream);
  GenerationRequest d;
  ASSERT_FALSE(Chat(With(""), &d));
  EXPECT_FALSE(d.sampling.max_tokens);
  EXPECT_EQ(d.agent_id, "");
  EXPECT_TRUE(d.reuse_cache);
  GenerationRequest cold;
  ASSERT_FALSE(Chat(With(R"(,"cache_prompt":false)"), &cold));
  EXPECT_FALSE(cold.reuse_cache);
}

struct BadCase {
  std::string body;
  int status;
  std::string param;
};

TEST(OpenAiJsonTest, RefusesBadChatRequests) {
  const std::vector<BadCase> cases = {
      {"", 400, ""},
      {"{", 400, ""},
      {"[]", 400, ""},
      {R"({"messages":[]})", 400, "messages"},
      {R"({"messages":"hi"})", 400, "messages"},
      {R"({})", 400, "messages"},
      {R"({"messages":[{"content":"x"}]})", 400, "messages[0].role"},
      {R"({"messages":[{"role":"tool","content":"x"}]})", 400, "messages[0].tool_call_id"},
      {R"({"messages":[{"role":"function","content":"x"}]})", 400, "messages[0].role"},
      {R"({"messages":[{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}]})", 400,
       "messages[0].function_call"},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":5}}]}]})", 400,
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]})", 400,
       "messages[0].tool_calls[0].id"},
      {R"({"messages":[{"role":"user"}]})", 400, "messages[0].content"},
      {R"({"messages":[{"role":"user","content":5}]})", 400, "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", 400,
       "messages[0].content[0].type"},
      {With(R"(,"model":"gpt-4")"), 404, "model"},
      {With(R"(,"model":7)"), 400, "model"},
      {With(R"(,"temperature":2.5)"), 400, "temperature"},
      {With(R"(,"temperature":-0.1)"), 400, "temperature"},
      {With(R"(,"temperature":"hot")"), 400, "temperature"},
      {With(R"(,"top_p":0)"), 400, "top_p"},
      {With(R"(,"top_p":1.01)"), 400, "top_p"},
      {With(R"(,"top_k":-1)"), 400, "top_k"},
      {With(R"(,"top_k":1.5)"), 400, "top_k"},
      {With(R"(,"max_tokens":0)"), 400, "max_tokens"},
      {With(R"(,"max_tokens":10.0)"), 400, "max_tokens"},
      {With(R"(,"max_completion_tokens":-5)"), 400, "max_completion_tokens"},
      {With(R"(,"max_tokens":99999999999999999999)"), 400, "max_tokens"},
      {With(R"(,"seed":"1")"), 400, "seed"},
      {With(R"(,"stop":["a","b","c","d","e"])"), 400, "stop"},
      {With(R"(,"stop":[1])"), 400, "stop"},
      {With(R"(,"stop":[""])"), 400, "stop"},
      {With(R"(,"stream":"yes")"), 400, "stream"},
      {With(R"(,"cache_prompt":0)"), 400, "cache_prompt"},
      {With(R"(,"stream_options":{"include_usage":true})"), 400, "stream_options"},
      {With(R"(,"stream":true,"stream_options":{"include_usage":1})"), 400,
       "stream_options.include_usage"},
      {With(R"(,"n":2)"), 400, "n"},
      {With(R"(,"tools":[{"type":"function"}])"), 400, "tools[0].function"},
      {With(R"(,"tools":[{"type":"custom","custom":{"name":"x"}}])"), 400, "tools[0].type"},
      {With(R"(,"tools":[{"type":"function","function":{"name":"a b"}}])"), 400, "tools[0].function.name"},
      {With(R"(,"tools":[{"type":"function","function":{"name":"a","parameters":"{}"}}])"), 400,
       "tools[0].function.parameters"},
      {With(R"(,"functions":[{"name":"a"}])"), 400, "functions"},
      {With(R"(,"tool_choice":"required")"), 400, "tool_choice"},
      {With(R"(,"tool_choice":"sometimes")"), 400, "tool_choice"},
      {With(R"(,"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":{"type":"function","function":{"name":"b"}})"),
       400, "tool_choice.function.name"},
      {With(R"(,"parallel_tool_calls":"yes")"), 400, "parallel_tool_calls"},
      {With(R"(,"tools":[{"type":"function","function":{"name":"a"}}],"response_format":{"type":"json_object"})"), 400,
       "response_format"},
      {With(R"(,"response_format":{"type":"json_schema"})"), 400, "response_format.json_schema"},
      {With(R"(,"response_format":{"type":"yaml"})"), 400, "response_format.type"},
      {With(R"(,"logprobs":"yes")"), 400, "logprobs"},
      {With(R"(,"top_logprobs":2)"), 400, "top_logprobs"},
      {With(R"(,"logprobs":true,"top_logprobs":21)"), 400, "top_logprobs"},
      {With(R"(,"agent_id":"../x")"), 400, "agent_id"},
      {With(R"(,"agent_id":5)"), 400, "agent_id"},
      {With(R"(,"session_id":"")"), 400, "session_id"},
      {With(R"(,"agent_id":"a","session_id":"b")"), 400, "session_id"},
  };
  for (const BadCase& c : cases) {
    auto e = Chat(c.body);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->http_status, c.status) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body;
    EXPECT_FALSE(e->message.empty());
    EXPECT_EQ(e->type, "invalid_request_error");
  }
}

// Issue 30: a call cut by max_tokens leaves arguments like `{\n"word"`,
// which clients (the OpenAI Agents SDK) echo back: whatever string we
// produced is accepted, kept byte for byte; only too-deep text is refused.
TEST(OpenAiJsonTest, AcceptsEchoedArgumentsThatAreNotAJsonObject) {
  for (const std::string args : {R"({\n\"word\")", "[1]", "", "not json"}) {
    GenerationRequest r;
    const std::string body = R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":null,)"
                             R"("tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":")" +
                             args + R"("}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]})";
    auto e = Chat(body, &r);
    ASSERT_FALSE(e) << body << " -> " << e->message;
    ASSERT_EQ(r.messages.size(), 3u);
    ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
    EXPECT_EQ(r.messages[1].tool_calls[0].arguments, json::parse("\"" + args + "\"").get<std::string>());
  }
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "[";
  auto e = Chat(R"({"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":")" +
                deep + R"("}}]}]})");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "json_too_deep");
  EXPECT_EQ(e->param, "messages[0].tool_calls[0].function.arguments");
}

TEST(OpenAiJsonTest, ParsesToolsToolMessagesAndResponseFormat) {
  GenerationRequest r;
  ASSERT_FALSE(Chat(R"({"messages":[
      {"role":"user","content":"Weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"sunny"}],
    "tools":[{"type":"function","function":{"name":"get_weather","description":"d",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
    "tool_choice":{"type":"function","function":{"name":"get_weather"}},
    "parallel_tool_calls":false})", &r));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].role, Role::kAssistant);
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.messages[2].role, Role::kTool);
  EXPECT_EQ(r.messages[2].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[2].content, "sunny");
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0].description, "d");
  EXPECT_EQ(r.tools[0].parameters, R"({"properties":{"city":{"type":"string"}},"type":"object"})");
  EXPECT_EQ(r.tool_choice.mode, ToolChoiceMode::kFunction);
  EXPECT_EQ(r.tool_choice.function, "get_weather");
  EXPECT_FALSE(r.parallel_tool_calls);

  GenerationRequest j;
  ASSERT_FALSE(Chat(With(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,
      "schema":{"type":"object"}}})"), &j));
  EXPECT_EQ(j.response_format.type, ResponseFormatType::kJsonSchema);
  EXPECT_EQ(j.response_format.schema, R"({"type":"object"})");
  EXPECT_TRUE(j.response_format.strict);
  GenerationRequest none;
  ASSERT_FALSE(Chat(With(R"(,"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"none",
      "response_format":{"type":"json_object"})"), &none));
  EXPECT_EQ(none.response_format.type, ResponseFormatType::kJsonObject);
}

TEST(OpenAiJsonTest, ToolCallsInResponsesAndChunks) {
  Usage u;
  const json r = json::parse(CompletionJson({"id1", "m", 5, RequestKind::kChat}, "", "", {{"call_a", "f", R"({"x":1})"}},
                                            FinishReason::kToolCalls, u));
  const json& msg = r["choices"][0]["message"];
  EXPECT_TRUE(msg["content"].is_null());
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(msg["tool_calls"][0]["id"], "call_a");
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], R"({"x":1})");
  ChunkFields first;
  first.tool_call = ToolCallDelta{0, "call_a", "f", "{"};
  const json c1 = json::parse(ChunkJson({"id1", "m", 5, RequestKind::kChat}, first));
  EXPECT_EQ(c1["choices"][0]["delta"]["tool_calls"][0],
            json::parse(R"({"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{"}})"));
  ChunkFields more;
  more.tool_call = ToolCallDelta{0, "", "", "}"};
  const json c2 = json::parse(ChunkJson({"id1", "m", 5, RequestKind::kChat}, more));
  EXPECT_EQ(c2["choices"][0]["delta"]["tool_calls"][0], json::parse(R"({"index":0,"function":{"arguments":"}"}})"));
}

TEST(OpenAiJsonTest, AgentIdFromHeadersMustAgree) {
  ParseContext ctx = Ctx();
  ctx.header_agent_id = "h1";
  GenerationRequest r;
  ASSERT_FALSE(Chat(With(R"(,"agent_id":"h1")"), &r, ctx));
  EXPECT_EQ(r.agent_id, "h1");
  auto e = Chat(With(R"(,"agent_id":"other")"), &r, ctx);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "agent_id");
  ctx.header_agent_id = "..";
  e = Chat(With(""), &r, ctx);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "X-Agent-Id");
  ctx.header_agent_id.reset();
  ctx.header_session_id = "s-1";
  ASSERT_FALSE(Chat(With(""), &r, ctx));
  EXPECT_EQ(r.agent_id, "s-1");
}

TEST(OpenAiJsonTest, Completions) {
  GenerationRequest r;
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":"Once","max_tokens":5})", Ctx(), &r));
  EXPECT_EQ(r.kind, RequestKind::kCompletion);
  EXPECT_EQ(r.prompt, "Once");
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":["Twice"]})", Ctx(), &r));
  EXPECT_EQ(r.prompt, "Twice");
  for (const char* bad : {R"({})", R"({"prompt":""})", R"({"prompt":["a","b"]})", R"({"prompt":[1,2]})",
                          R"({"prompt":"a","echo":true})", R"({"prompt":"a","suffix":"z"})",
                          R"({"prompt":"a","best_of":3})"}) {
    auto e = ParseCompletionRequest(bad, Ctx(), &r);
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->http_status, 400);
  }
}

TEST(OpenAiJsonTest, ResponseShapes) {
  Usage u;
  u.prompt_tokens = 10;
  u.completion_tokens = 3;
  u.cached_tokens = 8;
  u.agent_id = "a";
  u.cache_state = CacheState::kWarm;
  u.match = MatchType::kExtend;
  u.tokens_prefilled = 2;
  u.ttft_ms = 12.5;
  json chat = json::parse(CompletionJson({"id1", "m", 5, RequestKind::kChat}, "", "hé", {}, FinishReason::kLength, u));
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "hé");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chat["usage"]["total_tokens"], 13);
  EXPECT_EQ(chat["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
  EXPECT_EQ(chat["usage"]["agentkv"]["cache_state"], "warm");
  EXPECT_EQ(chat["usage"]["agentkv"]["match"], "extend");
  EXPECT_EQ(chat["usage"]["agentkv"]["tokens_prefilled"], 2);
  EXPECT_EQ(chat["usage"]["agentkv"]["ttft_ms"], 12.5);
  json text = json::parse(CompletionJson({"id2", "m", 5, RequestKind::kCompletion}, "", "x", {}, FinishReason::kStop, u));
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "x");
  json err = json::parse(ApiErrorJson(InvalidRequest("bad", "")));
  EXPECT_EQ(err["error"]["message"], "bad");
  EXPECT_TRUE(err["error"]["param"].is_null());
  EXPECT_TRUE(err["error"]["code"].is_null());
  EXPECT_EQ(err["error"]["type"], "invalid_request_error");
}

TEST(OpenAiJsonTest, StatusMapping) {
  EXPECT_EQ(ApiErrorFromStatus(Status::InvalidArgument("x")).http_status, 400);
  EXPECT_EQ(ApiErrorFromStatus(Status::Unsupported("x")).http_status, 400);
  EXPECT_EQ(ApiErrorFromStatus(Status::NotFound("x")).http_status, 404);
  EXPECT_EQ(ApiErrorFromStatus(Status::FailedPrecondition("x")).http_status, 409);
  EXPECT_EQ(ApiErrorFromStatus(Status::ResourceExhausted("x")).http_status, 429);
  EXPECT_EQ(ApiErrorFromStatus(Status::Unavailable("x")).http_status, 503);
  EXPECT_EQ(ApiErrorFromStatus(Status::Corruption("x")).http_status, 500);
  EXPECT_EQ(ApiErrorFromStatus(Status::IOError("x")).http_status, 500);
  EXPECT_EQ(ApiErrorFromStatus(Status::Internal("x")).http_status, 500);
}

}  // namespace
}  // namespace agentkv::api

namespace agentkv::api {
namespace {

TEST(ModelNameTest, AnyNameUnlessStrict) {
  ModelNames names{"served", {"alias"}, false};
  EXPECT_FALSE(CheckModelName("gpt-4o", names));
  EXPECT_FALSE(CheckModelName("claude-sonnet-4-5", names));
  names.strict = true;
  EXPECT_FALSE(CheckModelName("served", names));
  EXPECT_FALSE(CheckModelName("alias", names));
  auto e = CheckModelName("gpt-4o", names);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 404);
  EXPECT_EQ(e->code, "model_not_found");
}

}  // namespace
}  // namespace agentkv::api
