// Anthropic response, stream event and error shapes. The agentkv object in
// usage is our extension, as on the OpenAI routes (docs/api.md).

#include <ctime>

#include <nlohmann/json.hpp>

#include "api/anthropic_json.h"
#include "api/anthropic_tools.h"
#include "api/bounded_json.h"
#include "api/usage_json.h"

namespace agentkv::api {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string Frame(const char* event, const json& data) {
  return std::string("event: ") + event + "\ndata: " + Dump(data) + "\n\n";
}

// The three input counters add up to the prompt (Anthropic's convention).
json InputUsage(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.cached_tokens}};
}

json StopSequence(FinishReason finish, const Usage& usage) {
  if (finish == FinishReason::kStop && !usage.stop_sequence.empty()) return usage.stop_sequence;
  return nullptr;
}

}  // namespace

const char* AnthropicStopReason(FinishReason finish, const Usage& usage) {
  switch (finish) {
    case FinishReason::kLength:
      return "max_tokens";
    case FinishReason::kStop:
      return usage.stop_sequence.empty() ? "end_turn" : "stop_sequence";
    case FinishReason::kToolCalls:
      return "tool_use";
    default:
      return "end_turn";
  }
}

std::string AnthropicMessageJson(const MessageMeta& meta, std::string_view thinking, std::string_view text,
                                 const std::vector<ToolCall>& tool_calls, FinishReason finish, const Usage& usage) {
  json content = json::array();
  if (meta.thinking && !thinking.empty()) {
    content.push_back({{"type", "thinking"}, {"thinking", thinking}, {"signature", ""}});
  }
  if (!text.empty() || tool_calls.empty()) content.push_back({{"type", "text"}, {"text", text}});
  for (const ToolCall& call : tool_calls) {
    // The model's arguments; deeper than a request may nest (or not an
    // object): an empty input rather than a recursive dump of them.
    json input;
    if (ParseBoundedJson(call.arguments, &input) != JsonParse::kOk || !input.is_object()) input = json::object();
    content.push_back(
        {{"type", "tool_use"}, {"id", AnthropicToolUseId(call.id)}, {"name", call.name}, {"input", input}});
  }
  json u = InputUsage(usage);
  u["output_tokens"] = usage.completion_tokens;
  u["agentkv"] = AgentkvUsageJson(usage);
  json j = {{"id", meta.id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", meta.model},
            {"content", content},
            {"stop_reason", AnthropicStopReason(finish, usage)},
            {"stop_sequence", StopSequence(finish, usage)},
            {"usage", u}};
  return Dump(j);
}

std::string MessageStartEvent(const MessageMeta& meta, const Usage& prompt_usage) {
  json u = InputUsage(prompt_usage);
  u["output_tokens"] = 0;
  json message = {{"id", meta.id},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", meta.model},
                  {"content", json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage", u}};
  return Frame("message_start", {{"type", "message_start"}, {"message", message}});
}

std::string TextBlockStartEvent(int index) {
  return Frame("content_block_start", {{"type", "content_block_start"},
                                       {"index", index},
                                       {"content_block", {{"type", "text"}, {"text", ""}}}});
}

std::string ThinkingBlockStartEvent(int index) {
  return Frame("content_block_start", {{"type", "content_block_start"},
                                       {"index", index},
                                       {"content_block", {{"type", "thinking"}, {"thinking", ""}}}});
}

std::string ThinkingDeltaEvent(int index, std::string_view thinking) {
  return Frame("content_block_delta", {{"type", "content_block_delta"},
                                       {"index", index},
                                       {"delta", {{"type", "thinking_delta"}, {"thinking", thinking}}}});
}

std::string SignatureDeltaEvent(int index) {
  return Frame("content_block_delta", {{"type", "content_block_delta"},
                                       {"index", index},
                                       {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
}

std::string ToolUseBlockStartEvent(int index, const std::string& id, const std::string& name) {
  return Frame("content_block_start",
               {{"type", "content_block_start"},
                {"index", index},
                {"content_block",
                 {{"type", "tool_use"}, {"id", AnthropicToolUseId(id)}, {"name", name}, {"input", json::object()}}}});
}

std::string InputJsonDeltaEvent(int index, std::string_view partial_json) {
  return Frame("content_block_delta", {{"type", "content_block_delta"},
                                       {"index", index},
                                       {"delta", {{"type", "input_json_delta"}, {"partial_json", partial_json}}}});
}

std::string PingEvent() { return Frame("ping", {{"type", "ping"}}); }

std::string TextDeltaEvent(int index, std::string_view text) {
  return Frame("content_block_delta", {{"type", "content_block_delta"},
                                       {"index", index},
                                       {"delta", {{"type", "text_delta"}, {"text", text}}}});
}

std::string BlockStopEvent(int index) {
  return Frame("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
}

// Usage here is cumulative (Anthropic: the SDK overwrites its snapshot with
// every counter present), so the final message carries the exact totals.
std::string MessageDeltaEvent(FinishReason finish, const Usage& usage) {
  json u = InputUsage(usage);
  u["output_tokens"] = usage.completion_tokens;
  u["agentkv"] = AgentkvUsageJson(usage);
  return Frame("message_delta",
               {{"type", "message_delta"},
                {"delta", {{"stop_reason", AnthropicStopReason(finish, usage)},
                           {"stop_sequence", StopSequence(finish, usage)}}},
                {"usage", u}});
}

std::string MessageStopEvent() { return Frame("message_stop", {{"type", "message_stop"}}); }

std::string ErrorEvent(const ApiError& e) {
  return "event: error\ndata: " + AnthropicErrorJson(e) + "\n\n";
}

ApiError AnthropicError(const ApiError& error) {
  ApiError e = error;
  if (error.context_overflow) {
    // Anthropic's words, which Claude Code parses (/prompt is too long[^0-9]*
    // (\d+) tokens? > (\d+)/) to compact once. Its maximum is the longest
    // prompt that is served (Anthropic: "210883 tokens > 199999 maximum").
    e.type = "invalid_request_error";
    e.message = "prompt is too long: " + std::to_string(error.context_overflow->prompt_tokens) + " tokens > " +
                std::to_string(error.context_overflow->context_tokens - 1) + " maximum";
    return e;
  }
  switch (error.http_status) {
    case 400:
    case 405:
    case 409:
      e.type = "invalid_request_error";
      break;
    case 401:
      e.type = "authentication_error";
      break;
    case 403:
      e.type = "permission_error";
      break;
    case 404:
      e.type = "not_found_error";
      break;
    case 413:  // a body or a prompt too large in bytes, before any token count
      e.type = "request_too_large";
      break;
    case 429:
      e.type = "rate_limit_error";
      break;
    case 503:
      e.http_status = 529;
      e.type = "overloaded_error";
      break;
    case 499:
      break;  // nobody reads it
    default:
      e.type = "api_error";
      break;
  }
  return e;
}

std::string AnthropicErrorJson(const ApiError& e) {
  return Dump({{"type", "error"}, {"error", {{"type", e.type}, {"message", e.message}}}});
}

std::string AnthropicModelsJson(const std::vector<std::string>& ids, int64_t created_unix_s) {
  // RFC 3339, as Anthropic's created_at.
  char created[32];
  const std::time_t t = static_cast<std::time_t>(created_unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
  json data = json::array();
  for (const std::string& id : ids) {
    data.push_back({{"type", "model"}, {"id", id}, {"display_name", id}, {"created_at", created}});
  }
  return Dump({{"data", data},
               {"has_more", false},
               {"first_id", ids.empty() ? json(nullptr) : json(ids.front())},
               {"last_id", ids.empty() ? json(nullptr) : json(ids.back())}});
}

}  // namespace agentkv::api
