#pragma once
// The one way the API layer parses JSON it did not write: the request body,
// an assistant tool call's `arguments` string, a model's tool-call arguments.
// The text's nesting depth is checked (util/json_depth.h) before any DOM is
// built, so that nothing downstream (dump(), json_schema_to_grammar, Jinja's
// from_json, all recursive) ever sees more than kMaxJsonDepth levels.

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

}  // namespace agentkv::api
