#pragma once
// Small helpers shared by the request parsers (openai_json.cc,
// openai_tools.cc): field lookup with OpenAI's "null means absent" rule and
// the type error every parser reports the same way.

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

// 400 invalid_type: "'param' must be <expected>."
inline std::optional<ApiError> TypeError(const std::string& param, const char* expected) {
  return InvalidRequest("'" + param + "' must be " + expected + ".", param, "invalid_type");
}

}  // namespace agentkv::api
