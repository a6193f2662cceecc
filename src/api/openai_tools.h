#pragma once
// The tool-calling and structured-output parts of an OpenAI chat request:
// assistant tool_calls, tool messages, tools, tool_choice,
// parallel_tool_calls, response_format. Used by openai_json.cc; split out so
// each file keeps one concern. JSON stays in api/: everything becomes the
// native types of backend.h.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/backend.h"
#include "api/errors.h"

namespace agentkv::api {

// messages[i] of role "assistant": its tool_calls ([{id, type:"function",
// function:{name, arguments}}]) into msg->tool_calls. `param` is
// "messages[i]". Legacy function_call is refused (400 unsupported).
[[nodiscard]] std::optional<ApiError> ParseAssistantToolCalls(const nlohmann::json& message, const std::string& param,
                                                              ChatMessage* msg);

// messages[i] of role "tool": tool_call_id (required string) and name.
[[nodiscard]] std::optional<ApiError> ParseToolMessage(const nlohmann::json& message, const std::string& param,
                                                       ChatMessage* msg);

// The optional fields of a function tool `fn` (Chat Completions'
// tools[i].function, a Responses tools[i]): description (a string),
// parameters (a JSON Schema object, kept as its dump()) and strict (a
// boolean) into *out. A wrong type is a 400 naming "<param>.description"
// and so on; *out may then be partly filled.
[[nodiscard]] std::optional<ApiError> ParseFunctionToolFields(const nlohmann::json& fn, const std::string& param,
                                                              ToolDefinition* out);

// tools, tool_choice, parallel_tool_calls and response_format of the body.
// Refuses legacy `functions`/`function_call`, unknown tool types, a
// tool_choice naming a function not in tools, `required` without tools, and
// a JSON response_format together with forced tool calls.
[[nodiscard]] std::optional<ApiError> ParseToolsAndFormat(const nlohmann::json& body, GenerationRequest* out);

}  // namespace agentkv::api
