#pragma once
// OpenAI request bodies -> GenerationRequest (parse + validate at the door).
//
// Accepted (POST /v1/chat/completions): model, messages[{role, content,
// tool_calls, tool_call_id}], tools, tool_choice, parallel_tool_calls,
// response_format (text, json_object, json_schema; openai_tools.h),
// max_tokens | max_completion_tokens, temperature [0,2], top_p (0,1],
// top_k >= 0, seed, stop (string or <= 4 strings), stream,
// stream_options.include_usage, agent_id | session_id. /v1/completions takes
// prompt (a string, or an array of exactly one string) instead of messages.
// Unknown fields are ignored; known features agentkv lacks (n > 1,
// logprobs, echo, ...) are refused with 400 rather than silently dropped.
// `null` counts as absent everywhere. Full rules: docs/api.md.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/backend.h"
#include "api/errors.h"

namespace agentkv::api {

struct ParseContext {
  std::string model_id;                    // "model" must be this, an alias, or absent
  std::vector<std::string> model_aliases;
  std::optional<std::string> header_agent_id;    // X-Agent-Id, if sent
  std::optional<std::string> header_session_id;  // X-Session-ID, if sent
};

// On success fills every field of *out except request_id, namespace_id and
// cancel, and returns nullopt. On failure returns the error to send (400, or
// 404 for an unknown model) and leaves *out unspecified. Never throws.
[[nodiscard]] std::optional<ApiError> ParseChatRequest(std::string_view body, const ParseContext& ctx,
                                                       GenerationRequest* out);
[[nodiscard]] std::optional<ApiError> ParseCompletionRequest(std::string_view body,
                                                             const ParseContext& ctx,
                                                             GenerationRequest* out);

// Response bodies. `created` is Unix seconds.
struct ResponseMeta {
  std::string id;
  std::string model;
  int64_t created = 0;
  RequestKind kind = RequestKind::kChat;
};

// A whole non-streamed response ("chat.completion" or "text_completion").
// `text` must be valid UTF-8 (see utf8.h). Chat with tool calls:
// message.tool_calls = [{id, type:"function", function:{name, arguments}}]
// and message.content is null when `text` is empty.
std::string CompletionJson(const ResponseMeta& meta, std::string_view text, const std::vector<ToolCall>& tool_calls,
                           FinishReason finish, const Usage& usage);

// One streamed chunk ("chat.completion.chunk" or "text_completion").
struct ChunkFields {
  bool role = false;                   // chat: delta.role = "assistant"
  std::optional<std::string> content;  // delta content / text
  // chat: delta.tool_calls = [{index, id?, type?, function:{name?, arguments}}]
  // as OpenAI streams them: id, type and name only in a call's first delta.
  std::optional<ToolCallDelta> tool_call;
  std::optional<FinishReason> finish;  // null when unset
  bool usage_null = false;             // include_usage: "usage": null
};
std::string ChunkJson(const ResponseMeta& meta, const ChunkFields& fields);
// The final usage chunk: "choices": [] and "usage": {...}.
std::string UsageChunkJson(const ResponseMeta& meta, const Usage& usage);

// GET /v1/models.
std::string ModelsJson(const std::string& model_id, int64_t created);
// Admin routes.
std::string AgentJson(const AgentInfo& agent);
std::string AgentListJson(const std::vector<AgentInfo>& agents);
// DELETE /v1/agents/{id}: {"id", "object":"agent.deleted", "deleted", "evicted"}.
std::string AgentDeletedJson(const std::string& id, bool evict_only);

}  // namespace agentkv::api
