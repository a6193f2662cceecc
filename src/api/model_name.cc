#include "api/model_name.h"

namespace agentkv::api {

std::optional<ApiError> CheckModelName(std::string_view name, const ModelNames& names) {
  if (!names.strict || name == names.served) return std::nullopt;
  for (const std::string& alias : names.aliases) {
    if (name == alias) return std::nullopt;
  }
  ApiError e = InvalidRequest("The model '" + std::string(name.substr(0, 200)) +
                                  "' does not exist; this server serves '" + names.served + "'.",
                              "model", "model_not_found");
  e.http_status = 404;
  return e;
}

}  // namespace agentkv::api
