#pragma once
// Small helpers shared by the request parsers (openai_json.cc,
// openai_tools.cc, anthropic_json.cc, anthropic_tools.cc): field lookup with
// the "null means absent" rule both APIs follow, the tool-name rule both
// share, and the OpenAI-worded type error.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/errors.h"

namespace agentkv::api {

// The field, or nullptr when absent or null.
inline const nlohmann::json* Field(const nlohmann::json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// The function-name rule of both APIs: 1-64 of [a-zA-Z0-9_-].
inline bool ValidToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// 400 invalid_type: "'param' must be <expected>."
inline std::optional<ApiError> TypeError(const std::string& param, const char* expected) {
  return InvalidRequest("'" + param + "' must be " + expected + ".", param, "invalid_type");
}

// 400 in Anthropic's wording, "param: what" (how Anthropic's own messages
// read: "messages.1.content.0.type: ..."); `code` as for InvalidRequest.
inline ApiError AnthropicFieldError(const std::string& param, const std::string& what, const char* code) {
  return InvalidRequest(param + ": " + what, param, code);
}
// 400 invalid_type, Anthropic's wording: "param: must be <expected>".
inline ApiError AnthropicTypeError(const std::string& param, const std::string& expected) {
  return AnthropicFieldError(param, "must be " + expected, "invalid_type");
}

}  // namespace agentkv::api
