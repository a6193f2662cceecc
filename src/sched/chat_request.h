#pragma once
// api/ chat requests -> the engine's ChatRequest (roles, tool calls, tools,
// tool_choice, response_format), and the ids of the tool calls a reply makes.

#include <string>

#include "api/backend.h"
#include "engine/chat_format.h"

namespace agentkv::sched {

// A named tool_choice becomes "required" over that one tool (the grammar
// then admits only calls of it); json_object becomes the schema
// {"type":"object"}. `default_reasoning` applies when the request sets no
// reasoning_format. REQUIRES: request.kind == kChat.
engine::ChatRequest ToChatRequest(const api::GenerationRequest& request,
                                  api::ReasoningFormat default_reasoning = api::ReasoningFormat::kNone);

// "call_" + 24 random letters and digits (OpenAI's shape). Any thread.
std::string NewToolCallId();

}  // namespace agentkv::sched
