// Tool calls through the scheduler on the bundled model: a forced call is a
// valid call (grammar), and a conversation with tool calls and tool results
// reuses its cache and generates what a cold prefill of the same
// conversation generates (warm == cold oracle).
#include <gtest/gtest.h>

#include <string>

#include "engine/grammar.h"
#include "sched/scheduler.h"
#include "sched/scheduler_fixture.h"

namespace agentkv::sched {
namespace {

api::ToolDefinition Weather() {
  return {"get_weather", "Current weather of a city",
          R"({"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]}},"required":["city"]})"};
}

class SchedulerToolsTest : public SchedulerTest {
 protected:
  // `ns`: another namespace shares no cache with "default" (a cold oracle).
  std::shared_ptr<RecordingSink> Chat(const std::string& agent, const std::vector<api::ChatMessage>& messages,
                                      api::ToolChoiceMode choice, int max_tokens, const std::string& ns = "default") {
    api::GenerationRequest r;
    r.namespace_id = ns;
    r.agent_id = agent;
    r.kind = api::RequestKind::kChat;
    r.messages = messages;
    r.tools = {Weather()};
    r.tool_choice.mode = choice;
    if (choice == api::ToolChoiceMode::kFunction) r.tool_choice.function = "get_weather";
    r.sampling.temperature = 0;
    r.sampling.max_tokens = max_tokens;
    auto sink = std::make_shared<RecordingSink>();
    Status st = sched_->Submit(r, sink);
    EXPECT_TRUE(st.ok()) << st.ToString();
    sink->Wait();
    EXPECT_TRUE(sink->error().ok()) << sink->error().ToString();
    return sink;
  }
};

TEST_F(SchedulerToolsTest, ToolConversationReusesItsCacheAndMatchesAColdPrefill) {
  Boot(2);
  std::vector<api::ChatMessage> conv = {{api::Role::kSystem, "You answer questions about the weather."},
                                        {api::Role::kUser, "What is the weather in Paris?"}};
  // Turn 1: a forced call. Even the 16M model writes a valid one.
  auto t1 = Chat("agent", conv, api::ToolChoiceMode::kFunction, 200);
  ASSERT_EQ(t1->reason(), api::FinishReason::kToolCalls) << t1->text();
  const std::vector<api::ToolCall> calls = t1->tool_calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_TRUE(calls[0].id.starts_with("call_"));
  EXPECT_TRUE(calls[0].arguments.find("\"Paris\"") != std::string::npos ||
              calls[0].arguments.find("\"Rome\"") != std::string::npos)
      << calls[0].arguments;
  EXPECT_EQ(t1->text(), "");  // no free text before a forced call

  // Turn 2: the call and its result go back; the model answers.
  conv.push_back({api::Role::kAssistant, "", calls});
  conv.push_back({api::Role::kTool, "Sunny, 21 degrees.", {}, calls[0].id, ""});
  auto t2 = Chat("agent", conv, api::ToolChoiceMode::kNone, 12);
  EXPECT_EQ(t2->usage().cache_state, api::CacheState::kResident);
  // The whole previous prompt is reused: the template renders earlier turns
  // unchanged. (The reply re-rendered by the template differs from what was
  // generated in whitespace, so the match may be DIVERGE inside the call.)
  EXPECT_GE(t2->usage().cached_tokens, t1->usage().prompt_tokens);

  conv.push_back({api::Role::kAssistant, t2->text()});
  conv.push_back({api::Role::kUser, "And tomorrow?"});
  auto warm = Chat("agent", conv, api::ToolChoiceMode::kAuto, 16);
  EXPECT_EQ(warm->usage().match, api::MatchType::kExtend);
  EXPECT_GT(warm->usage().cached_tokens, t2->usage().prompt_tokens);
  // The oracle: a new agent prefilling the same conversation cold (in a
  // namespace of its own: in "default" it would start from the agent's cache).
  auto cold = Chat("fresh", conv, api::ToolChoiceMode::kAuto, 16, "oracle");
  EXPECT_EQ(cold->usage().cache_state, api::CacheState::kCold);
  EXPECT_EQ(warm->usage().prompt_tokens, cold->usage().prompt_tokens);
  EXPECT_EQ(warm->text(), cold->text());
  EXPECT_EQ(warm->tool_calls().size(), cold->tool_calls().size());
}

TEST_F(SchedulerToolsTest, InvalidSchemaIsRefusedAtSubmit) {
  Boot(1);
  api::GenerationRequest r;
  r.namespace_id = "default";
  r.agent_id = "bad";
  r.kind = api::RequestKind::kChat;
  r.messages = {{api::Role::kUser, "Hi"}};
  r.response_format.type = api::ResponseFormatType::kJsonSchema;
  r.response_format.schema = R"({"type":"object","properties":{"x":{"$ref":"#/missing"}}})";
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_EQ(sched_->Submit(r, sink).code(), StatusCode::kInvalidArgument);
  // json_object: the reply is a JSON object.
  r.response_format.type = api::ResponseFormatType::kJsonObject;
  r.response_format.schema.clear();
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 200;
  auto ok = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched_->Submit(r, ok).ok());
  ok->Wait();
  // The reply is returned as generated (leading whitespace kept, issue 30): JSON after any blanks.
  EXPECT_EQ(ok->text().substr(ok->text().find_first_not_of(" \t\r\n"), 1), "{") << ok->text();
}

// A schema enum of n strings.
std::string EnumSchema(size_t n, bool in_object) {
  std::string e = R"({"type":"string","enum":[)";
  for (size_t i = 0; i < n; ++i) e += (i ? ",\"item" : "\"item") + std::to_string(i) + "\"";
  e += "]}";
  return in_object ? R"({"type":"object","properties":{"v":)" + e + R"(},"required":["v"]})" : e;
}

api::GenerationRequest SchemaRequest(const std::string& agent, const std::string& schema) {
  api::GenerationRequest r;
  r.namespace_id = "default";
  r.agent_id = agent;
  r.kind = api::RequestKind::kChat;
  r.messages = {{api::Role::kUser, "Pick one."}};
  r.response_format.type = api::ResponseFormatType::kJsonSchema;
  r.response_format.schema = schema;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 64;
  return r;
}

TEST_F(SchedulerToolsTest, SchemasOverTheSizeBoundAreRefusedAtSubmit) {
  // Refused before their conversion to a grammar (a 270 KB schema took 1.2 s
  // of the HTTP thread and gave 4.3 MB of GBNF).
  Boot(1);
  const std::string schema = R"({"type":"object","properties":{"a":{"type":"string","description":")" +
                             std::string(engine::kMaxSchemaBytes, 'd') + R"("}}})";
  auto sink = std::make_shared<RecordingSink>();
  Status s = sched_->Submit(SchemaRequest("big", schema), sink);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("bytes"), std::string::npos) << s.ToString();
}

TEST_F(SchedulerToolsTest, AGrammarOverItsBoundsIsRefusedAtSubmit) {
  // An enum of 5,000, at the top and inside an object: 5,000 live
  // alternatives, refused before the inference thread sees them (they froze
  // every tenant for 10-60 s).
  Boot(1);
  for (bool in_object : {false, true}) {
    auto sink = std::make_shared<RecordingSink>();
    Status s = sched_->Submit(SchemaRequest("enum", EnumSchema(5000, in_object)), sink);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("alternatives"), std::string::npos) << s.ToString();
  }
  // A modest enum is served.
  auto ok = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched_->Submit(SchemaRequest("small", EnumSchema(20, true)), ok).ok());
  ok->Wait();
  EXPECT_TRUE(ok->error().ok()) << ok->error().ToString();
  // The reply is returned as generated (leading whitespace kept, issue 30): JSON after any blanks.
  EXPECT_EQ(ok->text().substr(ok->text().find_first_not_of(" \t\r\n"), 1), "{") << ok->text();
}

TEST_F(SchedulerToolsTest, AGrammarThatGrowsPastItsBoundsEndsOnlyItsTurn) {
  // anyOf of 4 enums of 500 inside an object: no rule over the bound, but
  // 2,000 live alternatives once the model reaches "v", and costly to judge
  // before that. The turn ends with an error (the live-stack bound or the
  // grammar-time budget, whichever comes first); the other tenant's turn
  // beside it finishes normally.
  Boot(2);
  std::string any = R"({"type":"object","properties":{"v":{"anyOf":[)";
  for (char c : std::string("abcd")) {
    any += c == 'a' ? R"({"type":"string","enum":[)" : R"(,{"type":"string","enum":[)";
    for (int i = 0; i < 500; ++i) any += (i ? ",\"" : "\"") + std::string(1, c) + std::to_string(i) + "\"";
    any += "]}";
  }
  any += R"(]}},"required":["v"]})";
  auto bad = std::make_shared<RecordingSink>();
  ASSERT_TRUE(sched_->Submit(SchemaRequest("attacker", any), bad).ok());
  auto other = std::make_shared<RecordingSink>();
  api::GenerationRequest plain = SchemaRequest("victim", "");
  plain.response_format = {};
  plain.sampling.max_tokens = 16;
  ASSERT_TRUE(sched_->Submit(plain, other).ok());
  bad->Wait();
  other->Wait();
  EXPECT_EQ(bad->error().code(), StatusCode::kInvalidArgument) << bad->error().ToString() << " " << bad->text();
  EXPECT_NE(bad->error().message().find("grammar"), std::string::npos) << bad->error().ToString();
  EXPECT_TRUE(other->error().ok()) << other->error().ToString();
  EXPECT_FALSE(other->text().empty());
}

}  // namespace
}  // namespace agentkv::sched
