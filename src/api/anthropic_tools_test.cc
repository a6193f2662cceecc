// Anthropic tools: request blocks -> the API-neutral messages the OpenAI
// route builds too, and tool_use in responses and streams.

#include "api/anthropic_tools.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/anthropic_json.h"
#include "api/anthropic_sse.h"

namespace agentkv::api {
namespace {

using nlohmann::json;

std::optional<ApiError> Parse(const std::string& body, GenerationRequest* out) {
  ParseContext ctx;
  ctx.model_id = "served";
  std::string model;
  return ParseMessagesRequest(body, ctx, out, &model);
}

const char* kTools =
    R"("tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object",
        "properties":{"city":{"type":"string"}},"required":["city"]},"cache_control":{"type":"ephemeral"}},
       {"name":"noop","input_schema":{"type":"object","properties":{}}}])";

std::string Conversation(const std::string& tool_choice) {
  return std::string(R"({"model":"m","max_tokens":16,)") + kTools + tool_choice + R"(,
      "messages":[{"role":"user","content":"weather in Paris?"},
                  {"role":"assistant","content":[{"type":"text","text":"Let me check."},
                     {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
                  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},
                     {"type":"text","text":"and tomorrow?"}]},
                  {"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Paris"}}]},
                  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,
                     "content":[{"type":"text","text":"no"},{"type":"text","text":"forecast"}]}]}]})";
}

TEST(AnthropicToolsTest, MapsToolUseAndToolResultOntoChatMessages) {
  GenerationRequest r;
  auto e = Parse(Conversation(""), &r);
  ASSERT_FALSE(e) << e->message;
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].description, "Weather of a city");
  EXPECT_EQ(json::parse(r.tools[0].parameters)["required"], json::array({"city"}));
  EXPECT_EQ(r.tool_choice.mode, ToolChoiceMode::kAuto);
  EXPECT_TRUE(r.parallel_tool_calls);
  ASSERT_EQ(r.messages.size(), 6u);
  EXPECT_EQ(r.messages[1].role, Role::kAssistant);
  EXPECT_EQ(r.messages[1].content, "Let me check.");
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].tool_calls[0].id, "toolu_1");
  EXPECT_EQ(r.messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(r.messages[1].tool_calls[0].arguments), json::parse(R"({"city":"Paris"})"));
  EXPECT_EQ(r.messages[2].role, Role::kTool);
  EXPECT_EQ(r.messages[2].tool_call_id, "toolu_1");
  EXPECT_EQ(r.messages[2].tool_name, "get_weather");
  EXPECT_EQ(r.messages[2].content, "sunny");
  EXPECT_EQ(r.messages[3].role, Role::kUser);
  EXPECT_EQ(r.messages[3].content, "and tomorrow?");
  EXPECT_EQ(r.messages[4].content, "");
  EXPECT_EQ(r.messages[4].tool_calls.size(), 1u);
  // Only tool results: no empty user turn after them.
  EXPECT_EQ(r.messages[5].role, Role::kTool);
  EXPECT_EQ(r.messages[5].content, "Error: no\nforecast");
}

TEST(AnthropicToolsTest, ToolChoiceModes) {
  struct Case {
    const char* choice;
    ToolChoiceMode mode;
    bool parallel;
  };
  const Case cases[] = {
      {R"(,"tool_choice":{"type":"auto"})", ToolChoiceMode::kAuto, true},
      {R"(,"tool_choice":{"type":"none"})", ToolChoiceMode::kNone, true},
      {R"(,"tool_choice":{"type":"any","disable_parallel_tool_use":true})", ToolChoiceMode::kRequired, false},
      {R"(,"tool_choice":{"type":"tool","name":"noop"})", ToolChoiceMode::kFunction, true},
  };
  for (const Case& c : cases) {
    GenerationRequest r;
    auto e = Parse(Conversation(c.choice), &r);
    ASSERT_FALSE(e) << c.choice << ": " << e->message;
    EXPECT_EQ(r.tool_choice.mode, c.mode) << c.choice;
    EXPECT_EQ(r.parallel_tool_calls, c.parallel) << c.choice;
  }
  GenerationRequest r;
  ASSERT_FALSE(Parse(Conversation(R"(,"tool_choice":{"type":"tool","name":"noop"})"), &r));
  EXPECT_EQ(r.tool_choice.function, "noop");
}

TEST(AnthropicToolsTest, RefusesBadToolsNamingTheField) {
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  auto body = [&](const std::string& extra) { return R"({"model":"m","max_tokens":4,)" + msgs + extra + "}"; };
  struct Case {
    std::string body;
    std::string param;
  };
  const Case cases[] = {
      {body(R"(,"tools":{})"), "tools"},
      {body(R"(,"tools":[{"name":"a b","input_schema":{"type":"object"}}])"), "tools.0.name"},
      {body(R"(,"tools":[{"name":"f","input_schema":"x"}])"), "tools.0.input_schema"},
      {body(R"(,"tools":[{"name":"f","input_schema":{"type":"string"}}])"), "tools.0.input_schema.type"},
      {body(R"(,"tools":[{"type":"bash_20250124","name":"bash"}])"), "tools.0.type"},
      {body(R"(,"tools":[{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}])"), "tools"},
      {body(R"(,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"g"})"),
       "tool_choice.name"},
      {body(R"(,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool"})"), "tool_choice.name"},
      {body(R"(,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"maybe"})"), "tool_choice.type"},
      {body(R"(,"tools":[{"name":"f","input_schema":{}}],"tool_choice":"auto")"), "tool_choice"},
      {body(R"(,"tool_choice":{"type":"tool","name":"f"})"), "tool_choice.name"},
      // tool_use in a user message, tool_result in an assistant one.
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"tool_use","id":"x","name":"f","input":{}}]}]})",
       "messages.0.content.0.type"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[
          {"type":"tool_use","id":"t1","name":"f","input":"x"}]},{"role":"user","content":"r"}]})",
       "messages.1.content.0.input"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[
          {"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"text","text":"r"},
          {"type":"tool_result","tool_use_id":"t1"}]}]})",
       "messages.2.content.1"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[
          {"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[
          {"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{}}]}]}]})",
       "messages.2.content.0.content.0.type"},
      {R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[
          {"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[
          {"type":"tool_result","tool_use_id":"t1","is_error":"yes"}]}]})",
       "messages.2.content.0.is_error"},
  };
  for (const Case& c : cases) {
    GenerationRequest r;
    auto e = Parse(c.body, &r);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->http_status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body << " -> " << e->message;
  }
}

TEST(AnthropicToolsTest, MessageWithToolUseBlocks) {
  Usage u;
  u.prompt_tokens = 10;
  std::vector<ToolCall> calls = {{"call_abc", "get_weather", R"({"city":"Paris"})"}, {"call_d", "noop", R"({"x":)"}};
  json j = json::parse(AnthropicMessageJson({"msg_1", "m"}, "", "", calls, FinishReason::kToolCalls, u));
  EXPECT_EQ(j["stop_reason"], "tool_use");
  ASSERT_EQ(j["content"].size(), 2u);  // no empty text block before the calls
  EXPECT_EQ(j["content"][0], json::parse(R"({"type":"tool_use","id":"toolu_abc","name":"get_weather",
                                            "input":{"city":"Paris"}})"));
  EXPECT_EQ(j["content"][1]["input"], json::object());  // arguments cut short: {}
  j = json::parse(AnthropicMessageJson({"msg_1", "m"}, "", "Checking.", {calls[0]}, FinishReason::kToolCalls, u));
  ASSERT_EQ(j["content"].size(), 2u);
  EXPECT_EQ(j["content"][0], json::parse(R"({"type":"text","text":"Checking."})"));
  EXPECT_EQ(j["content"][1]["type"], "tool_use");
}

std::vector<json> Events(const std::string& sse) {
  std::vector<json> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    const std::string frame = sse.substr(pos, end - pos);
    pos = end + 2;
    out.push_back(json::parse(frame.substr(frame.find("\ndata: ") + 7)));
  }
  return out;
}

TEST(AnthropicToolsTest, StreamsToolUseBlocksAsAnthropicDoes) {
  AnthropicSseEncoder enc({"msg_1", "m"});
  std::string sse = enc.Start(Usage{});
  sse += enc.Delta("Let me ");
  sse += enc.Delta("check.");
  sse += enc.ToolCall({0, "call_A", "get_weather", ""});
  sse += enc.ToolCall({0, "", "", R"({"city": )"});
  sse += enc.ToolCall({0, "", "", R"("Paris"})"});
  sse += enc.ToolCall({1, "call_B", "noop", "{}"});
  sse += enc.Finish(FinishReason::kToolCalls, Usage{});
  std::vector<std::string> seq;
  for (const json& e : Events(sse)) {
    std::string s = e["type"];
    if (e.contains("index")) s += ":" + std::to_string(e["index"].get<int>());
    if (e.contains("content_block")) s += ":" + e["content_block"]["type"].get<std::string>();
    if (e.contains("delta") && e["delta"].contains("type")) s += ":" + e["delta"]["type"].get<std::string>();
    seq.push_back(s);
  }
  EXPECT_EQ(seq, (std::vector<std::string>{
                     "message_start", "content_block_start:0:text", "ping", "content_block_delta:0:text_delta",
                     "content_block_delta:0:text_delta", "content_block_stop:0", "content_block_start:1:tool_use",
                     "content_block_delta:1:input_json_delta", "content_block_delta:1:input_json_delta",
                     "content_block_stop:1", "content_block_start:2:tool_use",
                     "content_block_delta:2:input_json_delta", "content_block_stop:2", "message_delta",
                     "message_stop"}));
  const std::vector<json> ev = Events(sse);
  EXPECT_EQ(ev[6]["content_block"], json::parse(R"({"type":"tool_use","id":"toolu_A","name":"get_weather",
                                                   "input":{}})"));
  EXPECT_EQ(ev[7]["delta"]["partial_json"].get<std::string>() + ev[8]["delta"]["partial_json"].get<std::string>(),
            R"({"city": "Paris"})");
  EXPECT_EQ(ev[13]["delta"]["stop_reason"], "tool_use");
}

TEST(AnthropicToolsTest, StreamOfOnlyACallHasNoTextBlock) {
  AnthropicSseEncoder enc({"msg_1", "m"});
  std::string sse = enc.Start(Usage{});
  sse += enc.ToolCall({0, "call_A", "noop", "{}"});
  sse += enc.Finish(FinishReason::kToolCalls, Usage{});
  const std::vector<json> ev = Events(sse);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[1]["content_block"]["type"], "tool_use");
  EXPECT_EQ(ev[1]["index"], 0);
  EXPECT_EQ(ev[2]["type"], "ping");
}

TEST(AnthropicToolsTest, ToolUseIds) {
  EXPECT_EQ(AnthropicToolUseId("call_x1"), "toolu_x1");
  EXPECT_EQ(AnthropicToolUseId("toolu_x1"), "toolu_x1");
  EXPECT_EQ(AnthropicToolUseId("other"), "other");
}

}  // namespace
}  // namespace agentkv::api
