#pragma once
// The request's "model" field, shared by the OpenAI and Anthropic routes.
//
// agentkv serves one model. Like llama-server, it answers whatever name the
// client sends (agent frameworks hard-code names such as "gpt-4o" or
// "claude-sonnet-4-5"), unless the server runs with --strict-model-name:
// then only the served id and its aliases (--alias, the file name,
// "agentkv") are accepted and anything else is a 404 model_not_found.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/errors.h"

namespace agentkv::api {

struct ModelNames {
  std::string served;                // the id /v1/models lists first
  std::vector<std::string> aliases;  // also listed (aliases from --alias) or accepted
  bool strict = false;               // --strict-model-name
};

// nullopt when `name` may be used; else the 404 to send.
[[nodiscard]] std::optional<ApiError> CheckModelName(std::string_view name, const ModelNames& names);

}  // namespace agentkv::api
