// The Response object and its output items (POST /v1/responses). The agentkv
// object in usage is our extension, as on the other routes (docs/api.md).

#include <nlohmann/json.hpp>

#include "api/responses_json.h"
#include "api/usage_json.h"

namespace agentkv::api {

using nlohmann::json;

std::string ResponsesItemId(const ResponsesMeta& meta, const char* prefix, size_t output_index) {
  // "resp_<hex>" -> "<prefix>_<hex>_<n>".
  const size_t us = meta.id.find('_');
  const std::string tail = us == std::string::npos ? meta.id : meta.id.substr(us + 1);
  return std::string(prefix) + "_" + tail + "_" + std::to_string(output_index);
}

json ResponsesMessageItem(const std::string& id, const std::string* text, const char* status) {
  json content = json::array();
  if (text != nullptr) {
    content.push_back(
        {{"type", "output_text"}, {"text", *text}, {"annotations", json::array()}, {"logprobs", json::array()}});
  }
  return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", content}};
}

json ResponsesFunctionCallItem(const ResponsesMeta& meta, const std::string& id, const ToolCall& call,
                               const char* status) {
  json item = {{"type", "function_call"}, {"id", id},         {"call_id", call.id},
               {"name", call.name},       {"arguments", call.arguments}, {"status", status}};
  if (auto it = meta.namespaced.find(call.name); it != meta.namespaced.end()) {
    item["namespace"] = it->second.first;
    item["name"] = it->second.second;
  }
  return item;
}

json ResponsesReasoningItem(const std::string& id, const std::string* text, const char* status) {
  json content = json::array();
  if (text != nullptr) content.push_back({{"type", "reasoning_text"}, {"text", *text}});
  return {{"type", "reasoning"}, {"id", id}, {"summary", json::array()}, {"content", content}, {"status", status}};
}

const char* ResponsesStatus(FinishReason finish) {
  switch (finish) {
    case FinishReason::kLength:
      return "incomplete";
    case FinishReason::kCancelled:
      return "cancelled";
    default:
      return "completed";
  }
}

json ResponsesObject(const ResponsesMeta& meta, const char* status, FinishReason finish, json output,
                     const Usage* usage) {
  if (status == nullptr) status = ResponsesStatus(finish);
  const bool incomplete = usage != nullptr && finish == FinishReason::kLength;
  // output_text: the SDKs' convenience, all output_text parts joined.
  std::string output_text;
  for (const json& item : output) {
    if (item["type"] != "message") continue;
    for (const json& part : item["content"]) output_text += part["text"].get<std::string>();
  }
  json j = meta.echo;
  j["id"] = meta.id;
  j["object"] = "response";
  j["created_at"] = meta.created_at;
  j["status"] = status;
  j["error"] = nullptr;
  j["incomplete_details"] = incomplete ? json{{"reason", "max_output_tokens"}} : json(nullptr);
  j["model"] = meta.model;
  j["output"] = std::move(output);
  j["output_text"] = output_text;
  if (usage != nullptr) {  // left out until known (the spec's usage is not nullable)
    j["usage"] = {{"input_tokens", usage->prompt_tokens},
                  // cache_write_tokens: 0, agentkv caches every prompt without a write
                  // premium (as Anthropic's cache_creation_input_tokens).
                  {"input_tokens_details", {{"cached_tokens", usage->cached_tokens}, {"cache_write_tokens", 0}}},
                  {"output_tokens", usage->completion_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", usage->prompt_tokens + usage->completion_tokens},
                  {"agentkv", AgentkvUsageJson(*usage)}};
  }
  return j;
}

std::string ResponsesJson(const ResponsesMeta& meta, std::string_view reasoning, std::string_view text,
                          const std::vector<ToolCall>& tool_calls, FinishReason finish, const Usage& usage) {
  json output = json::array();
  // The item max_output_tokens cut is "incomplete" (as the stream closes it).
  const bool cut = finish == FinishReason::kLength && tool_calls.empty();
  const bool with_message = !text.empty() || tool_calls.empty();
  if (!reasoning.empty()) {
    const std::string r(reasoning);
    const char* status = cut && text.empty() ? "incomplete" : "completed";
    output.push_back(ResponsesReasoningItem(ResponsesItemId(meta, "rs", output.size()), &r, status));
  }
  if (with_message) {
    const std::string t(text);
    output.push_back(
        ResponsesMessageItem(ResponsesItemId(meta, "msg", output.size()), &t, cut ? "incomplete" : "completed"));
  }
  for (const ToolCall& call : tool_calls) {
    output.push_back(ResponsesFunctionCallItem(meta, ResponsesItemId(meta, "fc", output.size()), call, "completed"));
  }
  return ResponsesObject(meta, nullptr, finish, std::move(output), &usage)
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace agentkv::api
