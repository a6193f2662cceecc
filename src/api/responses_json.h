#pragma once
// OpenAI Responses API (POST /v1/responses, what Codex CLI sends): request
// parsing into the same GenerationRequest the chat route builds, and the
// response object and its output items. The stream is responses_sse.h.
// The input items are responses_input.h.
// Shapes: ../shared/spec/openai-openapi.json, schemas CreateResponse and
// Response.
//
// Accepted: model, instructions (a system message first), input (a string:
// one user message; or items: message {role user|assistant|system|developer,
// content: string | input_text/output_text/refusal parts}, function_call,
// function_call_output, reasoning), tools (type "function", and "namespace"
// groups of functions; web_search, web_search_preview, local_shell and
// custom are ignored), tool_choice,
// parallel_tool_calls, max_output_tokens, temperature [0,2], top_p (0,1],
// stream, store (nothing is kept either way), text.format (text,
// json_object, json_schema), reasoning.effort ("none": no thinking),
// prompt_cache_key (the agent, after agentkv's own ids and the coding
// agents' headers), metadata, user, include, truncation, service_tier,
// max_tool_calls, top_logprobs 0, agentkv's agent_id / session_id.
// Refused with 400 naming the field: previous_response_id, conversation,
// background, prompt (agentkv stores nothing server-side), item_reference and
// other item types, image / file / audio content, other tool types
// (file_search, code_interpreter, mcp, ...), a function_call_output answering
// no earlier function_call. `null` counts as absent; unknown fields are
// ignored. Full rules: docs/api.md, "OpenAI Responses API".
//
// The same conversation renders the same ChatMessages as through
// /v1/chat/completions (text parts joined with "\n", a call's message
// holds the text before it), so an agent shares its cache across both APIs.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/backend.h"
#include "api/errors.h"
#include "api/openai_json.h"

namespace agentkv::api {

struct ResponsesMeta {
  std::string id;       // "resp_..."
  std::string model;    // as the client sent it
  int64_t created_at = 0;  // Unix seconds
  // The request's settings as the Response object echoes them (instructions,
  // tools, tool_choice, temperature, top_p, parallel_tool_calls,
  // max_output_tokens, store, metadata, text, reasoning, truncation,
  // service_tier, user, prompt_cache_key, ...), defaults filled in.
  nlohmann::json echo = nlohmann::json::object();
  // Functions of `namespace` tools (Codex groups its subagent tools so): the
  // model sees them as "<namespace>__<name>"; a call of one is returned as
  // {namespace, name}. Flattened name -> {namespace, name}.
  std::map<std::string, std::pair<std::string, std::string>> namespaced;
};

// The name the model sees for function `name` of namespace `ns`.
inline std::string NamespacedToolName(const std::string& ns, const std::string& name) { return ns + "__" + name; }

// On success fills *out (kind kChat; not request_id, namespace_id, cancel)
// and meta->model / meta->echo, returns nullopt. On failure returns the
// OpenAI-shaped error. Never throws.
[[nodiscard]] std::optional<ApiError> ParseResponsesRequest(std::string_view body, const ParseContext& ctx,
                                                            GenerationRequest* out, ResponsesMeta* meta);

// Output items ------------------------------------------------------------
// Item ids are derived from the response id: "msg_<hex>_<n>", "fc_<hex>_<n>",
// "rs_<hex>_<n>" for output index n (the same in a stream and without).
std::string ResponsesItemId(const ResponsesMeta& meta, const char* prefix, size_t output_index);

// {"type":"message","id","status","role":"assistant","content":[{"type":
// "output_text","text","annotations":[],"logprobs":[]}]} (content [] when
// `text` is null: the item as it opens).
nlohmann::json ResponsesMessageItem(const std::string& id, const std::string* text, const char* status);
// {"type":"function_call","id","call_id","name","arguments","status"}, plus
// "namespace" (and the name inside it) for a function of a namespace tool.
nlohmann::json ResponsesFunctionCallItem(const ResponsesMeta& meta, const std::string& id, const ToolCall& call,
                                         const char* status);
// {"type":"reasoning","id","summary":[],"content":[{"type":"reasoning_text",
// "text"}]} (content [] when `text` is null).
nlohmann::json ResponsesReasoningItem(const std::string& id, const std::string* text, const char* status);

// "completed" | "incomplete" (kLength) | "cancelled".
const char* ResponsesStatus(FinishReason finish);

// The Response object: id, object "response", created_at, status, error,
// incomplete_details ({"reason":"max_output_tokens"} when `finish` is
// kLength), model, output, output_text, usage (left out when `usage` is null:
// the object as a stream opens), and the echoed settings. `status`
// overrides ResponsesStatus(finish) when non-null ("in_progress", "failed").
nlohmann::json ResponsesObject(const ResponsesMeta& meta, const char* status, FinishReason finish,
                               nlohmann::json output, const Usage* usage);

// The whole non-streamed body: output = a reasoning item (when `reasoning`
// is not empty), a message (when `text` is not empty or there are no
// calls), then one function_call item per call.
std::string ResponsesJson(const ResponsesMeta& meta, std::string_view reasoning, std::string_view text,
                          const std::vector<ToolCall>& tool_calls, FinishReason finish, const Usage& usage);

}  // namespace agentkv::api
