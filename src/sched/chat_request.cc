#include "sched/chat_request.h"

#include <random>

namespace agentkv::sched {

engine::ChatRequest ToChatRequest(const api::GenerationRequest& r, api::ReasoningFormat default_reasoning) {
  engine::ChatRequest out;
  out.messages.reserve(r.messages.size());
  for (const api::ChatMessage& m : r.messages) {
    engine::ChatMessage msg;
    switch (m.role) {
      case api::Role::kSystem: msg.role = "system"; break;
      case api::Role::kUser: msg.role = "user"; break;
      case api::Role::kAssistant: msg.role = "assistant"; break;
      case api::Role::kTool: msg.role = "tool"; break;
    }
    msg.content = m.content;
    msg.tool_call_id = m.tool_call_id;
    msg.tool_name = m.tool_name;
    msg.reasoning_content = m.reasoning_content;
    for (const api::ToolCall& c : m.tool_calls) msg.tool_calls.push_back({c.id, c.name, c.arguments});
    out.messages.push_back(std::move(msg));
  }
  for (const api::ToolDefinition& t : r.tools) {
    if (r.tool_choice.mode == api::ToolChoiceMode::kFunction && t.name != r.tool_choice.function) continue;
    out.tools.push_back({t.name, t.description, t.parameters});
  }
  switch (r.tool_choice.mode) {
    case api::ToolChoiceMode::kAuto: out.tool_choice = engine::ChatToolChoice::kAuto; break;
    case api::ToolChoiceMode::kNone: out.tool_choice = engine::ChatToolChoice::kNone; break;
    case api::ToolChoiceMode::kRequired:
    case api::ToolChoiceMode::kFunction: out.tool_choice = engine::ChatToolChoice::kRequired; break;
  }
  out.parallel_tool_calls = r.parallel_tool_calls && r.tool_choice.mode != api::ToolChoiceMode::kFunction;
  switch (r.response_format.type) {
    case api::ResponseFormatType::kText: break;
    case api::ResponseFormatType::kJsonObject: out.json_schema = "{\"type\":\"object\"}"; break;
    case api::ResponseFormatType::kJsonSchema: out.json_schema = r.response_format.schema; break;
  }
  switch (r.reasoning_format.value_or(default_reasoning)) {
    case api::ReasoningFormat::kNone: out.reasoning_format = engine::ReasoningFormat::kNone; break;
    case api::ReasoningFormat::kAuto: out.reasoning_format = engine::ReasoningFormat::kAuto; break;
    case api::ReasoningFormat::kDeepseek: out.reasoning_format = engine::ReasoningFormat::kDeepseek; break;
  }
  out.enable_thinking = r.enable_thinking.value_or(true);
  return out;
}

std::string NewToolCallId() {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kChars) - 2);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kChars[pick(rng)];
  return id;
}

}  // namespace agentkv::sched
