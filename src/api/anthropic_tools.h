#pragma once
// The tool parts of an Anthropic Messages request (POST /v1/messages):
// `tools`, `tool_choice`, assistant `tool_use` blocks and user `tool_result`
// blocks, into the same API-neutral types (backend.h) the OpenAI route
// builds, so both APIs reach the same chat layer, grammars and agent cache.
// Used by anthropic_json.cc; split out so each file keeps one concern.
// Errors name the field in Anthropic's style ("tools.0.input_schema: ...").

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/backend.h"
#include "api/errors.h"

namespace agentkv::api {

// tools ([{name, description?, input_schema, type?:"custom", strict?,
// cache_control?}], <= 128, unique names) and tool_choice ({type: auto |
// any | tool | none, name (tool), disable_parallel_tool_use?}) of the body
// into out->tools, out->tool_choice and out->parallel_tool_calls. Refuses
// Anthropic-defined tool types (bash_*, web_search_*, ...), a missing or
// non-object input_schema, tool_choice any/tool without tools, and a
// tool_choice naming a tool not in tools.
[[nodiscard]] std::optional<ApiError> ParseAnthropicTools(const nlohmann::json& body, GenerationRequest* out);

// An assistant block {"type":"tool_use","id","name","input":{...}} -> *out
// (arguments = input serialized). `param` is "messages.N.content.M".
[[nodiscard]] std::optional<ApiError> ParseToolUseBlock(const nlohmann::json& block, const std::string& param,
                                                        ToolCall* out);

// A user block {"type":"tool_result","tool_use_id","content"?: string |
// text blocks,"is_error"?} -> a kTool message (tool_call_id, content; text
// blocks joined with "\n"; is_error: content prefixed "Error: ", since chat
// templates have no error flag). tool_name is left to the caller.
[[nodiscard]] std::optional<ApiError> ParseToolResultBlock(const nlohmann::json& block, const std::string& param,
                                                           ChatMessage* out);

// The "type" of a content block (named `param`, e.g. "messages.0.content.2"):
// 400 unless the block is an object with a string "type".
[[nodiscard]] std::optional<ApiError> BlockType(const nlohmann::json& block, const std::string& param,
                                                std::string* type);

// `value` (named `param`) as text: a string, or an array of text blocks
// joined with "\n" (system, tool_result content). Other blocks are 400
// unsupported ("... not supported in <where>; only text").
[[nodiscard]] std::optional<ApiError> StringOrTextBlocks(const nlohmann::json& value, const std::string& param,
                                                         const char* where, std::string* out);

// The text of a {"type":"text","text"} block (cache_control and citations
// ignored). `param` names the block.
[[nodiscard]] std::optional<ApiError> TextOfBlock(const nlohmann::json& block, const std::string& param,
                                                  std::string* out);

// The id a tool_use block shows for a call the backend named ("call_X" ->
// "toolu_X", Anthropic's prefix); other ids are returned unchanged.
std::string AnthropicToolUseId(std::string_view call_id);

}  // namespace agentkv::api
