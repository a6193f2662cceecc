#pragma once
// Small helpers shared by the request parsers (openai_json.cc,
// openai_tools.cc, anthropic_json.cc, anthropic_tools.cc, responses_json.cc,
// responses_input.cc): field lookup with the "null means absent" rule both
// APIs follow, the tool-name rule both share, the errors in each API's
// wording (Chat Completions and Responses word them alike) and field readers.

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/errors.h"

namespace agentkv::api {

// The largest max_tokens / max_output_tokens any route accepts (2^30: far past
// any context, small enough for int32 arithmetic).
inline constexpr int64_t kMaxTokensLimit = int64_t{1} << 30;

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

// 400 unsupported / invalid_value with the message `what`.
inline std::optional<ApiError> UnsupportedError(const std::string& what, const std::string& param) {
  return InvalidRequest(what, param, "unsupported");
}
inline std::optional<ApiError> InvalidValueError(const std::string& what, const std::string& param) {
  return InvalidRequest(what, param, "invalid_value");
}

// 400 missing_required_parameter: "'param' is required."
inline std::optional<ApiError> MissingError(const std::string& param) {
  return InvalidRequest("'" + param + "' is required.", param, "missing_required_parameter");
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
// 400 missing_required_parameter, Anthropic's wording: "param: Field required".
inline ApiError AnthropicMissingError(const std::string& param) {
  return AnthropicFieldError(param, "Field required", "missing_required_parameter");
}

// Whose wording a shared field reader's errors use.
enum class Wording { kOpenAi, kAnthropic };

// The required string obj[name] into *out; errors name "param.name", worded
// as `wording`'s API words them.
inline std::optional<ApiError> RequireStringField(const nlohmann::json& obj, const char* name, const std::string& param,
                                                  std::string* out, Wording wording = Wording::kOpenAi) {
  const nlohmann::json* v = Field(obj, name);
  const std::string where = param + "." + name;
  const bool anthropic = wording == Wording::kAnthropic;
  if (v == nullptr) return anthropic ? AnthropicMissingError(where) : MissingError(where);
  if (!v->is_string()) return anthropic ? AnthropicTypeError(where, "a string") : TypeError(where, "a string");
  *out = v->get<std::string>();
  return std::nullopt;
}

// The optional number obj[name] into *out (left as is when absent); finite
// and in [lo, hi], or (lo, hi] when lo_open, else 400 invalid_value
// "'name' must be in [lo, hi]."
inline std::optional<ApiError> GetNumberInRange(const nlohmann::json& obj, const char* name, double lo, double hi,
                                                bool lo_open, float* out) {
  const nlohmann::json* v = Field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return TypeError(name, "a number");
  const double d = v->get<double>();
  const bool lo_ok = lo_open ? d > lo : d >= lo;
  if (!std::isfinite(d) || !lo_ok || d > hi) {
    return InvalidValueError("'" + std::string(name) + "' must be in " + (lo_open ? "(" : "[") +
                                 nlohmann::json(lo).dump() + ", " + nlohmann::json(hi).dump() + "].",
                             name);
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

}  // namespace agentkv::api
