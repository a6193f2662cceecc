#pragma once
// The one way the API layer parses JSON it did not write: the request body,
// an assistant tool call's `arguments` string, a model's tool-call arguments.
// The text's nesting depth is checked (util/json_depth.h) before any DOM is
// built, so that nothing downstream (dump(), json_schema_to_grammar, Jinja's
// from_json, all recursive) ever sees more than kMaxJsonDepth levels.

#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/errors.h"
#include "util/json_depth.h"

namespace agentkv::api {

enum class JsonParse {
  kOk,       // *out holds the value
  kInvalid,  // not JSON; *out is discarded
  kTooDeep,  // nests deeper than kMaxJsonDepth; not parsed, *out is discarded
};

// Parses `text` unless it nests deeper than kMaxJsonDepth. Never throws
// on bad input (std::bad_alloc still propagates).
[[nodiscard]] JsonParse ParseBoundedJson(std::string_view text, nlohmann::json* out);

// 400 invalid_request_error, code "json_too_deep": "<what> nests JSON more
// than 128 levels deep; at most 128 levels are accepted."
ApiError JsonTooDeep(const std::string& what, std::string param);

// An assistant tool call's `arguments` string in a request's history
// (chat tool_calls, /v1/responses function_call items). Whatever we
// generated must be accepted back, so any string is, JSON or not (a call
// cut by max_tokens leaves `{"word"`; the chat layer renders such text as a
// string, engine/chat_format.cc): the only refusal is
// JsonTooDeep("'<param>'", param) for text nesting deeper than kMaxJsonDepth,
// which the chat layer would walk recursively.
std::optional<ApiError> CheckEchoedArguments(std::string_view arguments, const std::string& param);

// The door of every request parser: parses `body` with ParseBoundedJson and
// returns `parse(j)` for the object it holds. A body nested too deep, not
// JSON or not an object is a 400 (json_too_deep / invalid_json) and `parse`
// is not called; a std::exception out of `parse` (a type check we missed) is
// a 400 "Invalid request: <what>". std::bad_alloc propagates: not the
// client's mistake, the router answers 503.
// `parse`: std::optional<ApiError>(const nlohmann::json& object).
template <typename Parse>
std::optional<ApiError> ParseJsonObjectBody(std::string_view body, Parse&& parse) {
  try {
    nlohmann::json j;
    const JsonParse parsed = ParseBoundedJson(body, &j);
    if (parsed == JsonParse::kTooDeep) return JsonTooDeep("The request body", "");
    if (parsed == JsonParse::kInvalid) return InvalidRequest("The request body is not valid JSON.", "", "invalid_json");
    if (!j.is_object()) return InvalidRequest("The request body must be a JSON object.", "", "invalid_json");
    return parse(static_cast<const nlohmann::json&>(j));
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& ex) {
    return InvalidRequest(std::string("Invalid request: ") + ex.what(), "");
  }
}

}  // namespace agentkv::api
