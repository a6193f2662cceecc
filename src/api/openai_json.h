#pragma once
// OpenAI request bodies -> GenerationRequest (parse + validate at the door).
//
// Accepted (POST /v1/chat/completions): model, messages[{role, content,
// tool_calls, tool_call_id}], tools, tool_choice, parallel_tool_calls,
// response_format (text, json_object, json_schema; openai_tools.h),
// max_tokens | max_completion_tokens, temperature [0,2], top_p (0,1],
// top_k >= 0, seed, stop (string or <= 4 strings), logprobs + top_logprobs
// (chat; /v1/completions: logprobs 0..5, the legacy shape), stream,
// stream_options.include_usage, agent_id | session_id. /v1/completions takes
// prompt (a string, or an array of exactly one string) instead of messages.
// Unknown fields are ignored; known features agentkv lacks (n > 1,
// echo, logit_bias, ...) are refused with 400 rather than silently dropped.
// `null` counts as absent everywhere. Full rules: docs/api.md.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/agent_identity.h"
#include "api/backend.h"
#include "api/errors.h"
#include "api/model_name.h"

namespace agentkv::api {

struct ParseContext {
  std::string model_id;                    // the served model (model_name.h)
  std::vector<std::string> model_aliases;
  bool strict_model_name = false;          // only model_id and the aliases are accepted
  std::optional<std::string> header_agent_id;    // X-Agent-Id, if sent
  std::optional<std::string> header_session_id;  // X-Session-ID, if sent
  AgentToolHeaders tool_headers;                 // coding agents' session headers (agent_identity.h)
  std::string system_fingerprint;                // echoed in responses (OpenAI: a string)
};

// "model" (if present) against ctx's names; shared with the Anthropic parser.
[[nodiscard]] std::optional<ApiError> CheckModel(std::string_view name, const ParseContext& ctx);
// Agent id and parent from ctx's headers and the body's agent_id/session_id
// (already type-checked strings), per agent_identity.h; fills out->agent_id
// and out->parent_agent_id.
[[nodiscard]] std::optional<ApiError> ResolveRequestAgent(const ParseContext& ctx,
                                                          std::optional<std::string> body_agent_id,
                                                          std::optional<std::string> body_session_id,
                                                          GenerationRequest* out);

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
  std::string system_fingerprint;  // Backend::SystemFingerprint()
  // SamplingParams::top_logprobs: -1 "logprobs": null; >= 0 every choice
  // carries a logprobs object (chat: {"content": [...], "refusal": null};
  // completions: the legacy {tokens, token_logprobs, top_logprobs, text_offset}).
  int32_t top_logprobs = -1;
};

// A whole non-streamed response ("chat.completion" or "text_completion").
// `text` must be valid UTF-8 (see utf8.h). Chat with tool calls:
// message.tool_calls = [{id, type:"function", function:{name, arguments}}]
// and message.content is null when `text` is empty.
// `reasoning` (the model's thinking split out of the reply, chat only) is
// message.reasoning_content when non-empty, as llama-server sends it.
// `logprobs`: every sampled token's (GenerationSink::OnLogprob), used when
// meta.top_logprobs >= 0.
std::string CompletionJson(const ResponseMeta& meta, std::string_view reasoning, std::string_view text,
                           const std::vector<ToolCall>& tool_calls, FinishReason finish, const Usage& usage,
                           const std::vector<TokenLogprob>& logprobs = {});

// One streamed chunk ("chat.completion.chunk" or "text_completion").
struct ChunkFields {
  bool role = false;                   // chat: delta.role = "assistant"
  std::optional<std::string> content;  // delta content / text
  std::optional<std::string> reasoning_content;  // chat: delta.reasoning_content (llama-server's field)
  // chat: delta.tool_calls = [{index, id?, type?, function:{name?, arguments}}]
  // as OpenAI streams them: id, type and name only in a call's first delta.
  std::optional<ToolCallDelta> tool_call;
  std::optional<FinishReason> finish;  // null when unset
  bool usage_null = false;             // include_usage: "usage": null
  // meta.top_logprobs >= 0: the logprobs of the tokens sampled since the
  // previous chunk; `text_offset` (completions) is the byte offset of the
  // first of them in the whole text.
  std::vector<TokenLogprob> logprobs;
  int64_t text_offset = 0;
};
std::string ChunkJson(const ResponseMeta& meta, const ChunkFields& fields);
// The final usage chunk: "choices": [] and "usage": {...}.
std::string UsageChunkJson(const ResponseMeta& meta, const Usage& usage);

// GET /v1/models.
// GET /v1/models: one entry per id (the served model first, then --alias names).
std::string ModelsJson(const std::vector<std::string>& ids, int64_t created);
// Admin routes.
std::string AgentJson(const AgentInfo& agent);
std::string AgentListJson(const std::vector<AgentInfo>& agents);
// DELETE /v1/agents/{id}: {"id", "object":"agent.deleted", "deleted", "evicted"}.
std::string AgentDeletedJson(const std::string& id, bool evict_only);

}  // namespace agentkv::api
