#pragma once
// Anthropic Messages API (POST /v1/messages): request parsing into the same
// GenerationRequest the OpenAI routes build, and the response, event and
// error shapes of Anthropic's API (docs.anthropic.com, "Messages" and
// "Streaming Messages"; the shapes @anthropic-ai/sdk parses).
//
// Accepted: model (required; any name unless --strict-model-name),
// max_tokens (required, >= 1), messages[{role: user|assistant, content:
// string | blocks}], system (string | text blocks), stop_sequences (<= 16
// non-empty strings), temperature [0, 1], top_p (0, 1], top_k >= 0, stream,
// metadata {user_id}, thinking (accepted, no thinking blocks are produced),
// tools / tool_choice and tool_use / tool_result blocks (anthropic_tools.h),
// agentkv's agent_id / session_id. cache_control and citations are ignored
// (agentkv caches every prefix anyway).
// Refused with 400 (invalid_request_error): image / document / search_result
// / server-tool blocks, Anthropic-defined tool types, a final assistant
// message (prefill), mcp_servers.
// `null` counts as absent; unknown fields are ignored. Full rules:
// docs/api.md, "Anthropic Messages API".

#include <optional>
#include <string>
#include <string_view>

#include "api/backend.h"
#include "api/errors.h"
#include "api/openai_json.h"

namespace agentkv::api {

// On success fills *out (kind kChat; not request_id, namespace_id, cancel)
// and *model_echo (the "model" the client sent, echoed in the response),
// returns nullopt. On failure returns the error (OpenAI-shaped ApiError; the
// router renders it in Anthropic's shape with AnthropicError). Never throws.
[[nodiscard]] std::optional<ApiError> ParseMessagesRequest(std::string_view body, const ParseContext& ctx,
                                                           GenerationRequest* out, std::string* model_echo);

// Response side ----------------------------------------------------------

struct MessageMeta {
  std::string id;     // "msg_..."
  std::string model;  // as the client sent it
  // The request enabled thinking: the model's thinking (split out of the
  // reply) is returned as a thinking block first; otherwise it is dropped.
  bool thinking = false;
};

// "end_turn" | "stop_sequence" | "max_tokens" | "tool_use" (kCancelled:
// "end_turn"; nobody reads it).
const char* AnthropicStopReason(FinishReason finish, const Usage& usage);

// The whole non-streamed message: {"id","type":"message","role":"assistant",
// "model","content":[{"type":"thinking","thinking","signature":""} (only when
// meta.thinking and `thinking` is not empty), {"type":"text","text"}, {"type":"tool_use","id":"toolu_...",
// "name","input":{...}}...],"stop_reason","stop_sequence",
// "usage":{input_tokens, cache_creation_input_tokens, cache_read_input_tokens,
// output_tokens, agentkv{...}}}. input_tokens counts the prompt tokens NOT
// read from the cache (Anthropic's convention: the three input counters add
// up to the prompt); cache_creation_input_tokens is 0 (agentkv caches every
// prompt without a write premium). `text` must be valid UTF-8. The text
// block is left out when `text` is empty and there are tool calls. A call
// whose arguments are not a JSON object (cut by max_tokens) shows input {}.
std::string AnthropicMessageJson(const MessageMeta& meta, std::string_view thinking, std::string_view text,
                                 const std::vector<ToolCall>& tool_calls, FinishReason finish, const Usage& usage);

// Stream events, each a complete "event: NAME\ndata: JSON\n\n" frame.
std::string MessageStartEvent(const MessageMeta& meta, const Usage& prompt_usage);
std::string TextBlockStartEvent(int index);
// A thinking block: content_block_start {"type":"thinking","thinking":""},
// thinking_delta pieces, then one signature_delta (agentkv signs nothing:
// the signature is "") before its content_block_stop.
std::string ThinkingBlockStartEvent(int index);
std::string ThinkingDeltaEvent(int index, std::string_view thinking);
std::string SignatureDeltaEvent(int index);
// content_block_start of {"type":"tool_use","id","name","input":{}}; the
// input then arrives as input_json_delta partial_json pieces.
std::string ToolUseBlockStartEvent(int index, const std::string& id, const std::string& name);
std::string InputJsonDeltaEvent(int index, std::string_view partial_json);
std::string PingEvent();
std::string TextDeltaEvent(int index, std::string_view text);
std::string BlockStopEvent(int index);
std::string MessageDeltaEvent(FinishReason finish, const Usage& usage);
std::string MessageStopEvent();
std::string ErrorEvent(const ApiError& anthropic_error);

// Anthropic's view of an error: same message, Anthropic's type and status.
//   400 invalid_request_error (a prompt over the context, error.context_overflow:
//       "prompt is too long: N tokens > M maximum" with M = context - 1, the
//       longest prompt served, worded exactly as Anthropic sends it)
//   401 authentication_error   403 permission_error   404 not_found_error
//   405 invalid_request_error  409 invalid_request_error (agent busy)
//   413 request_too_large      429 rate_limit_error
//   500 api_error              503 -> 529 overloaded_error (loading, stopping)
ApiError AnthropicError(const ApiError& error);
// {"type":"error","error":{"type","message"}}.
std::string AnthropicErrorJson(const ApiError& anthropic_error);

// GET /v1/models as Anthropic's SDK reads it (sent when the request carries
// an anthropic-version header): {"data":[{"type":"model","id",
// "display_name","created_at"}],"has_more":false,"first_id","last_id"}.
std::string AnthropicModelsJson(const std::vector<std::string>& ids, int64_t created_unix_s);

}  // namespace agentkv::api
