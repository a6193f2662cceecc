// POST /v1/responses: request parsing, the Response body and the event
// stream (ResponsesSseEncoder), without a router.

#include "api/responses_json.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/responses_sse.h"

namespace agentkv::api {
namespace {

using nlohmann::json;

ParseContext Ctx() {
  ParseContext c;
  c.model_id = "served";
  return c;
}

std::optional<ApiError> Parse(const std::string& body, GenerationRequest* out = nullptr,
                              const ParseContext& ctx = Ctx()) {
  GenerationRequest r;
  ResponsesMeta meta;
  return ParseResponsesRequest(body, ctx, out ? out : &r, &meta);
}

// A valid request with `extra` (",\"k\":v") spliced in.
std::string With(const std::string& extra) { return R"({"model":"gpt-5","input":"hi")" + extra + "}"; }

void ExpectError(const std::string& body, const std::string& param) {
  std::optional<ApiError> e = Parse(body);
  ASSERT_TRUE(e) << body;
  EXPECT_EQ(e->http_status, 400) << body;
  EXPECT_EQ(e->type, "invalid_request_error");
  EXPECT_EQ(e->param, param) << e->message;
}

TEST(ResponsesJsonTest, StringInputAndInstructions) {
  GenerationRequest r;
  ResponsesMeta meta;
  auto e = ParseResponsesRequest(
      R"({"model":"gpt-5-codex","instructions":"be brief","input":"hello","max_output_tokens":20,
          "temperature":0.7,"top_p":0.9,"stream":true,"store":false,"parallel_tool_calls":false,
          "include":["reasoning.encrypted_content"],"service_tier":"auto","truncation":"auto",
          "metadata":{"k":"v"},"user":"u1","reasoning":{"effort":"none","summary":"auto"}})",
      Ctx(), &r, &meta);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(meta.model, "gpt-5-codex");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, Role::kSystem);
  EXPECT_EQ(r.messages[0].content, "be brief");
  EXPECT_EQ(r.messages[1].role, Role::kUser);
  EXPECT_EQ(r.messages[1].content, "hello");
  EXPECT_EQ(r.sampling.max_tokens, 20);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.enable_thinking, false);  // effort "none"
  EXPECT_EQ(meta.echo["temperature"], 0.7);  // as sent, not the float
  EXPECT_EQ(meta.echo["instructions"], "be brief");
  EXPECT_EQ(meta.echo["max_output_tokens"], 20);
  EXPECT_EQ(meta.echo["store"], false);
  EXPECT_EQ(meta.echo["metadata"]["k"], "v");
  EXPECT_EQ(meta.echo["truncation"], "auto");
}

TEST(ResponsesJsonTest, EveryItemType) {
  GenerationRequest r;
  auto e = Parse(R"({"model":"m","input":[
      {"type":"message","role":"developer","content":"rules"},
      {"role":"user","content":[{"type":"input_text","text":"q1"},{"type":"input_text","text":"more"}]},
      {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"sum"}],"encrypted_content":"xx"},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"a1","annotations":[]}]},
      {"type":"function_call","call_id":"call_1","name":"shell","arguments":"{\"cmd\":\"ls\"}"},
      {"type":"function_call","call_id":"call_2","name":"read","arguments":"{}"},
      {"type":"function_call_output","call_id":"call_1","output":"a.txt"},
      {"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"x"}]},
      {"type":"reasoning","id":"rs_2","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},
      {"type":"function_call","call_id":"call_3","name":"shell","arguments":"{}"},
      {"type":"function_call_output","call_id":"call_3","output":"done"},
      {"role":"system","content":"reminder"},
      {"role":"user","content":"q2"}]})",
                 &r);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.messages.size(), 9u);
  EXPECT_EQ(r.messages[0].role, Role::kSystem);
  EXPECT_EQ(r.messages[0].content, "rules");
  EXPECT_EQ(r.messages[1].content, "q1\nmore");
  const ChatMessage& a1 = r.messages[2];
  EXPECT_EQ(a1.role, Role::kAssistant);
  EXPECT_EQ(a1.content, "a1");
  EXPECT_EQ(a1.reasoning_content, "sum");
  ASSERT_EQ(a1.tool_calls.size(), 2u);  // both calls join the message before them
  EXPECT_EQ(a1.tool_calls[0].id, "call_1");
  EXPECT_EQ(a1.tool_calls[0].name, "shell");
  EXPECT_EQ(a1.tool_calls[0].arguments, "{\"cmd\":\"ls\"}");
  EXPECT_EQ(a1.tool_calls[1].name, "read");
  EXPECT_EQ(r.messages[3].role, Role::kTool);
  EXPECT_EQ(r.messages[3].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[3].tool_name, "shell");
  EXPECT_EQ(r.messages[3].content, "a.txt");
  EXPECT_EQ(r.messages[4].tool_name, "read");
  EXPECT_EQ(r.messages[4].content, "x");
  // A call after tool output starts an assistant message of its own.
  EXPECT_EQ(r.messages[5].role, Role::kAssistant);
  EXPECT_EQ(r.messages[5].content, "");
  EXPECT_EQ(r.messages[5].reasoning_content, "think");
  ASSERT_EQ(r.messages[5].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[6].role, Role::kTool);
  EXPECT_EQ(r.messages[7].role, Role::kSystem);  // in place
  EXPECT_EQ(r.messages[8].content, "q2");
}

// The conversation a chat client sends renders the same messages, so turn 2
// through one API reuses turn 1 through the other.
TEST(ResponsesJsonTest, SameMessagesAsTheChatRoute) {
  GenerationRequest chat, resp;
  auto e = ParseChatRequest(R"({"model":"m","messages":[
      {"role":"system","content":"sys"},
      {"role":"user","content":[{"type":"text","text":"q1"},{"type":"text","text":"q1b"}]},
      {"role":"assistant","content":"let me look","tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"shell","arguments":"{\"cmd\":\"ls\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","name":"shell","content":"a.txt"},
      {"role":"assistant","content":"a.txt is there"},
      {"role":"user","content":"q2"}]})",
                            Ctx(), &chat);
  ASSERT_FALSE(e) << e->message;
  e = Parse(R"({"model":"m","instructions":"sys","input":[
      {"role":"user","content":[{"type":"input_text","text":"q1"},{"type":"input_text","text":"q1b"}]},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"let me look"}]},
      {"type":"function_call","call_id":"call_1","name":"shell","arguments":"{\"cmd\":\"ls\"}"},
      {"type":"function_call_output","call_id":"call_1","output":"a.txt"},
      {"role":"assistant","content":"a.txt is there"},
      {"role":"user","content":"q2"}]})",
            &resp);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(chat.messages.size(), resp.messages.size());
  for (size_t i = 0; i < chat.messages.size(); ++i) {
    const ChatMessage& c = chat.messages[i];
    const ChatMessage& r = resp.messages[i];
    EXPECT_EQ(c.role, r.role) << i;
    EXPECT_EQ(c.content, r.content) << i;
    EXPECT_EQ(c.tool_call_id, r.tool_call_id) << i;
    EXPECT_EQ(c.tool_name, r.tool_name) << i;
    EXPECT_EQ(c.reasoning_content, r.reasoning_content) << i;
    ASSERT_EQ(c.tool_calls.size(), r.tool_calls.size()) << i;
    for (size_t k = 0; k < c.tool_calls.size(); ++k) {
      EXPECT_EQ(c.tool_calls[k].id, r.tool_calls[k].id);
      EXPECT_EQ(c.tool_calls[k].name, r.tool_calls[k].name);
      EXPECT_EQ(c.tool_calls[k].arguments, r.tool_calls[k].arguments);
    }
  }
}

TEST(ResponsesJsonTest, ToolsToolChoiceAndTextFormat) {
  GenerationRequest r;
  ResponsesMeta meta;
  auto e = ParseResponsesRequest(
      With(R"(,"tools":[{"type":"function","name":"shell","description":"run","parameters":{"type":"object"},
              "strict":false},{"type":"web_search"},{"type":"local_shell"},
              {"type":"custom","name":"apply_patch","format":{"type":"grammar"}}],
              "tool_choice":{"type":"function","name":"shell"})"),
      Ctx(), &r, &meta);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.tools.size(), 1u);  // web_search, local_shell and custom ignored
  EXPECT_EQ(r.tools[0].name, "shell");
  EXPECT_EQ(r.tools[0].description, "run");
  EXPECT_EQ(r.tools[0].parameters, R"({"type":"object"})");
  EXPECT_EQ(r.tool_choice.mode, ToolChoiceMode::kFunction);
  EXPECT_EQ(r.tool_choice.function, "shell");
  EXPECT_EQ(meta.echo["tools"].size(), 1u);
  EXPECT_EQ(meta.echo["tool_choice"]["name"], "shell");

  GenerationRequest f;
  e = Parse(With(R"(,"text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object"},"strict":true},
                   "verbosity":"low"})"),
            &f);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(f.response_format.type, ResponseFormatType::kJsonSchema);
  EXPECT_EQ(f.response_format.schema, R"({"type":"object"})");
  EXPECT_TRUE(f.response_format.strict);
  GenerationRequest j;
  ASSERT_FALSE(Parse(With(R"(,"text":{"format":{"type":"json_object"}})"), &j));
  EXPECT_EQ(j.response_format.type, ResponseFormatType::kJsonObject);
  GenerationRequest req;
  ASSERT_FALSE(Parse(With(R"(,"tools":[{"type":"function","name":"a"}],"tool_choice":"required")"), &req));
  EXPECT_EQ(req.tool_choice.mode, ToolChoiceMode::kRequired);
}

TEST(ResponsesJsonTest, BadInputsNameTheirField) {
  ExpectError(R"({"model":"m"})", "input");
  ExpectError(R"({"input":[]})", "input");
  ExpectError(R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]})",
              "input[0].content[0].type");
  ExpectError(R"({"input":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"input_file"}]}]})",
              "input[1].content[0].type");
  ExpectError(R"({"input":[{"role":"robot","content":"a"}]})", "input[0].role");
  ExpectError(R"({"input":[{"role":"user"}]})", "input[0].content");
  ExpectError(R"({"input":[{"type":"function_call_output","call_id":"nope","output":"x"}]})", "input[0].call_id");
  ExpectError(R"({"input":[{"type":"function_call","call_id":"c","name":"f","arguments":[1]}]})",
              "input[0].arguments");
  // Any arguments string is accepted back (a cut call's `{"word"`), only
  // too-deep text is refused (issue 30).
  GenerationRequest cut;
  ASSERT_FALSE(Parse(R"({"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{\"word\""},)"
                     R"({"type":"function_call_output","call_id":"c","output":"x"}]})",
                     &cut));
  ASSERT_FALSE(cut.messages.empty());
  ASSERT_EQ(cut.messages[0].tool_calls.size(), 1u);
  EXPECT_EQ(cut.messages[0].tool_calls[0].arguments, "{\"word\"");
  std::optional<ApiError> deep = Parse(R"({"input":[{"type":"function_call","call_id":"c","name":"f","arguments":")" +
                                       std::string(200, '[') + R"("}]})");
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->code, "json_too_deep");
  EXPECT_EQ(deep->param, "input[0].arguments");
  ExpectError(R"({"input":[{"type":"function_call","name":"f","arguments":"{}"}]})", "input[0].call_id");
  ExpectError(R"({"input":[{"type":"item_reference","id":"msg_1"}]})", "input[0].type");
  ExpectError(R"({"input":[{"type":"local_shell_call","id":"x"}]})", "input[0].type");
  ExpectError(With(R"(,"previous_response_id":"resp_1")"), "previous_response_id");
  ExpectError(With(R"(,"conversation":"conv_1")"), "conversation");
  ExpectError(With(R"(,"background":true)"), "background");
  ExpectError(With(R"(,"tools":[{"type":"file_search","vector_store_ids":["vs_1"]}])"), "tools[0].type");
  ExpectError(With(R"(,"tools":[{"type":"web_search"},{"type":"mcp","server_label":"x"}])"), "tools[1].type");
  ExpectError(With(R"(,"tools":[{"type":"function","name":"bad name"}])"), "tools[0].name");
  ExpectError(With(R"(,"tool_choice":{"type":"function","name":"ghost"})"), "tool_choice.name");
  ExpectError(With(R"(,"tool_choice":"required")"), "tool_choice");
  ExpectError(With(R"(,"max_output_tokens":0)"), "max_output_tokens");
  ExpectError(With(R"(,"max_output_tokens":1.5)"), "max_output_tokens");
  ExpectError(With(R"(,"temperature":3)"), "temperature");
  ExpectError(With(R"(,"text":{"format":{"type":"json_schema","name":"x"}})"), "text.format.schema");
  ExpectError(With(R"(,"text":{"format":{"type":"yaml"}})"), "text.format.type");
  ExpectError(With(R"(,"stream":"yes")"), "stream");
  ExpectError(With(R"(,"instructions":5)"), "instructions");
  ExpectError(With(R"(,"prompt_cache_key":5)"), "prompt_cache_key");
  EXPECT_TRUE(Parse("{nope"));
  EXPECT_TRUE(Parse("[1]"));
}

TEST(ResponsesJsonTest, PromptCacheKeyNamesTheAgentAfterExplicitIds) {
  GenerationRequest r;
  ASSERT_FALSE(Parse(With(R"(,"prompt_cache_key":"conv-123")"), &r));
  EXPECT_EQ(r.agent_id, "conv-123");
  GenerationRequest hashed;
  ASSERT_FALSE(Parse(With(R"(,"prompt_cache_key":"has spaces/and slashes")"), &hashed));
  EXPECT_EQ(hashed.agent_id.rfind("h-", 0), 0u);
  ParseContext ctx = Ctx();
  ctx.header_agent_id = "mine";
  GenerationRequest header;
  ASSERT_FALSE(Parse(With(R"(,"prompt_cache_key":"conv-123")"), &header, ctx));
  EXPECT_EQ(header.agent_id, "mine");
  ParseContext codex = Ctx();
  codex.tool_headers.codex_session = "sess-9";
  GenerationRequest tool;
  ASSERT_FALSE(Parse(With(R"(,"prompt_cache_key":"conv-123")"), &tool, codex));
  EXPECT_EQ(tool.agent_id, "sess-9");
}

// Codex 0.169 groups its subagent tools in a namespace tool: the model sees
// "<namespace>__<name>", the call comes back as {namespace, name}, and sent
// back it renders as the model wrote it.
TEST(ResponsesJsonTest, NamespaceToolsFlattenAndSplitBack) {
  GenerationRequest r;
  ResponsesMeta meta;
  auto e = ParseResponsesRequest(
      With(R"(,"tools":[{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents","tools":[
              {"type":"function","name":"spawn_agent","description":"Spawn","parameters":{"type":"object"}},
              {"type":"custom","name":"freeform"}]}])"),
      Ctx(), &r, &meta);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0].name, "multi_agent_v1__spawn_agent");
  meta.id = "resp_abc";
  const std::vector<ToolCall> calls = {{"call_1", "multi_agent_v1__spawn_agent", "{}"}};
  json body = json::parse(ResponsesJson(meta, "", "", calls, FinishReason::kToolCalls, Usage{}));
  EXPECT_EQ(body["output"][0]["namespace"], "multi_agent_v1");
  EXPECT_EQ(body["output"][0]["name"], "spawn_agent");
  ResponsesSseEncoder enc(meta);
  std::string sse = enc.ToolCall({0, "call_1", "multi_agent_v1__spawn_agent", "{}"});
  sse += enc.Finish(FinishReason::kToolCalls, Usage{});
  EXPECT_NE(sse.find(R"("name":"spawn_agent","namespace":"multi_agent_v1")"), std::string::npos) << sse;
  EXPECT_EQ(sse.find("multi_agent_v1__"), std::string::npos) << sse;

  GenerationRequest back;
  ASSERT_FALSE(Parse(R"({"input":[{"role":"user","content":"go"},
      {"type":"function_call","call_id":"call_1","namespace":"multi_agent_v1","name":"spawn_agent","arguments":"{}"},
      {"type":"function_call_output","call_id":"call_1","output":"ok"}]})",
                     &back));
  EXPECT_EQ(back.messages[1].tool_calls[0].name, "multi_agent_v1__spawn_agent");
  EXPECT_EQ(back.messages[2].tool_name, "multi_agent_v1__spawn_agent");
  ExpectError(With(R"(,"tools":[{"type":"namespace","name":"n"}])"), "tools[0].tools");
  ExpectError(With(R"(,"tools":[{"type":"namespace","name":"n","tools":[{"type":"mcp"}]}])"), "tools[0].tools[0].type");
}

// The required keys of the spec's Response schema (and of the items and usage
// it references): openai-openapi.json, components.schemas.Response,
// OutputMessage, OutputTextContent, FunctionToolCall, ResponseUsage.
void ExpectResponseShape(const json& r) {
  for (const char* k : {"id", "object", "created_at", "error", "incomplete_details", "instructions", "model", "tools",
                        "output", "parallel_tool_calls", "metadata", "tool_choice", "temperature", "top_p"}) {
    EXPECT_TRUE(r.contains(k)) << k << " in " << r.dump();
  }
  EXPECT_EQ(r["object"], "response");
  for (const json& item : r["output"]) {
    if (item["type"] == "message") {
      for (const char* k : {"id", "type", "role", "content", "status"}) EXPECT_TRUE(item.contains(k)) << k;
      for (const json& part : item["content"]) {
        for (const char* k : {"type", "text", "annotations", "logprobs"}) EXPECT_TRUE(part.contains(k)) << k;
      }
    } else if (item["type"] == "function_call") {
      for (const char* k : {"type", "call_id", "name", "arguments"}) EXPECT_TRUE(item.contains(k)) << k;
    } else {
      EXPECT_EQ(item["type"], "reasoning");
      for (const char* k : {"id", "summary", "type"}) EXPECT_TRUE(item.contains(k)) << k;
    }
  }
  if (r.contains("usage")) {
    for (const char* k : {"input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details",
                          "total_tokens"}) {
      EXPECT_TRUE(r["usage"].contains(k)) << k;
    }
  }
}

ResponsesMeta Meta() {
  ResponsesMeta m;
  GenerationRequest r;
  EXPECT_FALSE(ParseResponsesRequest(With(R"(,"tools":[{"type":"function","name":"shell"}])"), Ctx(), &r, &m));
  m.id = "resp_abc";
  m.created_at = 1700000000;
  return m;
}

Usage SomeUsage() {
  Usage u;
  u.prompt_tokens = 30;
  u.cached_tokens = 12;
  u.completion_tokens = 5;
  u.agent_id = "a1";
  return u;
}

TEST(ResponsesJsonTest, BodyTextCallsAndIncomplete) {
  const ResponsesMeta meta = Meta();
  json r = json::parse(ResponsesJson(meta, "", "hello", {}, FinishReason::kStop, SomeUsage()));
  ExpectResponseShape(r);
  EXPECT_EQ(r["id"], "resp_abc");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_TRUE(r["incomplete_details"].is_null());
  EXPECT_EQ(r["model"], "gpt-5");
  EXPECT_EQ(r["output_text"], "hello");
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["id"], "msg_abc_0");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "hello");
  EXPECT_EQ(r["usage"]["input_tokens"], 30);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 12);
  EXPECT_EQ(r["usage"]["output_tokens"], 5);
  EXPECT_EQ(r["usage"]["total_tokens"], 35);
  EXPECT_EQ(r["usage"]["agentkv"]["agent_id"], "a1");
  EXPECT_EQ(r["tools"][0]["name"], "shell");
  EXPECT_EQ(r["tool_choice"], "auto");

  const std::vector<ToolCall> calls = {{"call_1", "shell", "{\"cmd\":\"ls\"}"}, {"call_2", "shell", "{}"}};
  r = json::parse(ResponsesJson(meta, "", "", calls, FinishReason::kToolCalls, SomeUsage()));
  ExpectResponseShape(r);
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 2u);  // no empty message before the calls
  EXPECT_EQ(r["output"][0]["type"], "function_call");
  EXPECT_EQ(r["output"][0]["id"], "fc_abc_0");
  EXPECT_EQ(r["output"][0]["call_id"], "call_1");
  EXPECT_EQ(r["output"][0]["arguments"], "{\"cmd\":\"ls\"}");
  EXPECT_EQ(r["output"][1]["call_id"], "call_2");

  r = json::parse(ResponsesJson(meta, "hmm", "cut", {}, FinishReason::kLength, SomeUsage()));
  ExpectResponseShape(r);
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  ASSERT_EQ(r["output"].size(), 2u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "hmm");
  EXPECT_EQ(r["output"][1]["status"], "incomplete");
}

struct Event {
  std::string name;
  json data;
};

std::vector<Event> ParseEvents(const std::string& sse) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    const std::string frame = sse.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(frame.rfind("event: ", 0), 0u) << frame;
    const size_t nl = frame.find('\n');
    EXPECT_EQ(frame.compare(nl + 1, 6, "data: "), 0) << frame;
    out.push_back({frame.substr(7, nl - 7), json::parse(frame.substr(nl + 7))});
  }
  return out;
}

std::vector<std::string> Names(const std::vector<Event>& events) {
  std::vector<std::string> names;
  for (const Event& e : events) names.push_back(e.name);
  return names;
}

TEST(ResponsesSseTest, TextEventsInOrderAndJoinToTheBody) {
  const ResponsesMeta meta = Meta();
  ResponsesSseEncoder enc(meta);
  std::string sse = enc.Start(Usage{});
  // "café!" split inside the é: no event splits a code point.
  sse += enc.Delta("caf\xC3");
  sse += enc.Delta("\xA9");
  sse += enc.Delta("!");
  sse += enc.Finish(FinishReason::kStop, SomeUsage());
  EXPECT_TRUE(enc.done());
  EXPECT_EQ(enc.Delta("late"), "");
  const std::vector<Event> events = ParseEvents(sse);
  EXPECT_EQ(Names(events), (std::vector<std::string>{
                               "response.created", "response.in_progress", "response.output_item.added",
                               "response.content_part.added", "response.output_text.delta",
                               "response.output_text.delta", "response.output_text.delta",
                               "response.output_text.done", "response.content_part.done",
                               "response.output_item.done", "response.completed"}));
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data["type"], events[i].name);
    EXPECT_EQ(events[i].data["sequence_number"], i);
    if (events[i].name == "response.output_text.delta") {
      EXPECT_EQ(events[i].data["item_id"], "msg_abc_0");
      text += events[i].data["delta"].get<std::string>();
    }
  }
  EXPECT_EQ(text, "caf\xC3\xA9!");
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_FALSE(events[0].data["response"].contains("usage"));
  ExpectResponseShape(events[0].data["response"]);
  EXPECT_EQ(events[7].data["text"], text);
  const json final_response = events.back().data["response"];
  ExpectResponseShape(final_response);
  // The final response is the non-streamed body.
  json body = json::parse(ResponsesJson(meta, "", text, {}, FinishReason::kStop, SomeUsage()));
  EXPECT_EQ(final_response, body);
}

TEST(ResponsesSseTest, FunctionCallEvents) {
  const ResponsesMeta meta = Meta();
  ResponsesSseEncoder enc(meta);
  std::string sse = enc.Start(Usage{});
  sse += enc.ToolCall({0, "call_1", "shell", "{\"cmd\":"});
  sse += enc.ToolCall({0, "", "", "\"ls\"}"});
  sse += enc.ToolCall({1, "call_2", "shell", ""});
  sse += enc.ToolCall({1, "", "", "{}"});
  sse += enc.Finish(FinishReason::kToolCalls, SomeUsage());
  const std::vector<Event> events = ParseEvents(sse);
  EXPECT_EQ(Names(events),
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added",
                "response.function_call_arguments.delta", "response.function_call_arguments.delta",
                "response.function_call_arguments.done", "response.output_item.done", "response.output_item.added",
                "response.function_call_arguments.delta", "response.function_call_arguments.done",
                "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[2].data["item"]["call_id"], "call_1");
  EXPECT_EQ(events[2].data["item"]["arguments"], "");
  EXPECT_EQ(events[5].data["arguments"], "{\"cmd\":\"ls\"}");
  EXPECT_EQ(events[5].data["name"], "shell");
  EXPECT_EQ(events[7].data["output_index"], 1);
  const std::vector<ToolCall> calls = {{"call_1", "shell", "{\"cmd\":\"ls\"}"}, {"call_2", "shell", "{}"}};
  EXPECT_EQ(events.back().data["response"],
            json::parse(ResponsesJson(meta, "", "", calls, FinishReason::kToolCalls, SomeUsage())));
}

TEST(ResponsesSseTest, ReasoningThenTextThenIncomplete) {
  const ResponsesMeta meta = Meta();
  ResponsesSseEncoder enc(meta);
  std::string sse = enc.Reasoning("hm");  // starts the stream itself
  sse += enc.Delta("ok");
  sse += enc.Finish(FinishReason::kLength, SomeUsage());
  const std::vector<Event> events = ParseEvents(sse);
  EXPECT_EQ(Names(events), (std::vector<std::string>{
                               "response.created", "response.in_progress", "response.output_item.added",
                               "response.reasoning_text.delta", "response.reasoning_text.done",
                               "response.output_item.done", "response.output_item.added",
                               "response.content_part.added", "response.output_text.delta",
                               "response.output_text.done", "response.content_part.done",
                               "response.output_item.done", "response.incomplete"}));
  EXPECT_EQ(events.back().data["response"],
            json::parse(ResponsesJson(meta, "hm", "ok", {}, FinishReason::kLength, SomeUsage())));
}

TEST(ResponsesSseTest, EmptyReplyAndError) {
  const ResponsesMeta meta = Meta();
  ResponsesSseEncoder empty(meta);
  std::vector<Event> events = ParseEvents(empty.Finish(FinishReason::kStop, SomeUsage()));
  ASSERT_EQ(events.size(), 8u);  // created, in_progress, one empty message (6), completed
  EXPECT_EQ(events.back().data["response"],
            json::parse(ResponsesJson(meta, "", "", {}, FinishReason::kStop, SomeUsage())));

  ResponsesSseEncoder failing(meta);
  std::string sse = failing.Delta("par");
  ApiError err;
  err.http_status = 500;
  err.message = "boom";
  sse += failing.Error(err);
  EXPECT_TRUE(failing.done());
  EXPECT_EQ(failing.Finish(FinishReason::kStop, SomeUsage()), "");
  events = ParseEvents(sse);
  EXPECT_EQ(events.back().name, "response.failed");
  EXPECT_EQ(events.back().data["response"]["status"], "failed");
  EXPECT_EQ(events.back().data["response"]["error"]["code"], "server_error");
  EXPECT_EQ(events.back().data["response"]["error"]["message"], "boom");
  ExpectResponseShape(events.back().data["response"]);
}

}  // namespace
}  // namespace agentkv::api
