#pragma once
// The reasoning parts of an OpenAI chat request, named as llama-server names
// them: `reasoning_format` (none | auto | deepseek), `chat_template_kwargs`
// (its enable_thinking), `reasoning_effort` ("none" turns thinking off), and
// an assistant message's `reasoning_content` sent back. Used by
// openai_json.cc; JSON stays in api/.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/backend.h"
#include "api/errors.h"

namespace agentkv::api {

// "none" | "auto" | "deepseek" -> the format; nullopt for any other name.
std::optional<ReasoningFormat> ReasoningFormatFromName(const std::string& name);

// reasoning_format, chat_template_kwargs.enable_thinking (a boolean; other
// kwargs are accepted and ignored) and reasoning_effort of the body into
// out->reasoning_format / out->enable_thinking. Wrong types and unknown
// formats are 400.
[[nodiscard]] std::optional<ApiError> ParseReasoningOptions(const nlohmann::json& body, GenerationRequest* out);

// messages[i] of role "assistant": reasoning_content (string or null) into
// msg->reasoning_content. `param` is "messages[i]".
[[nodiscard]] std::optional<ApiError> ParseAssistantReasoning(const nlohmann::json& message, const std::string& param,
                                                              ChatMessage* msg);

}  // namespace agentkv::api
