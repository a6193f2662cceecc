#include "api/bounded_json.h"

namespace agentkv::api {

JsonParse ParseBoundedJson(std::string_view text, nlohmann::json* out) {
  if (!JsonDepthWithin(text, kMaxJsonDepth)) {
    *out = nlohmann::json(nlohmann::json::value_t::discarded);
    return JsonParse::kTooDeep;
  }
  *out = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  return out->is_discarded() ? JsonParse::kInvalid : JsonParse::kOk;
}

ApiError JsonTooDeep(const std::string& what, std::string param) {
  const std::string limit = std::to_string(kMaxJsonDepth);
  return InvalidRequest(what + " nests JSON more than " + limit + " levels deep; at most " + limit +
                            " levels of objects and arrays are accepted.",
                        std::move(param), "json_too_deep");
}

std::optional<ApiError> CheckEchoedArguments(std::string_view arguments, const std::string& param) {
  if (JsonDepthWithin(arguments, kMaxJsonDepth)) return std::nullopt;
  return JsonTooDeep("'" + param + "'", param);
}

}  // namespace agentkv::api
