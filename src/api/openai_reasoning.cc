#include "api/openai_reasoning.h"

#include "api/json_fields.h"

namespace agentkv::api {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

std::optional<ReasoningFormat> ReasoningFormatFromName(const std::string& name) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "auto") return ReasoningFormat::kAuto;
  if (name == "deepseek") return ReasoningFormat::kDeepseek;
  return std::nullopt;
}

MaybeError ParseReasoningOptions(const json& body, GenerationRequest* out) {
  if (const json* v = Field(body, "reasoning_format"); v != nullptr && !v->is_null()) {
    if (!v->is_string()) return TypeError("reasoning_format", "a string");
    out->reasoning_format = ReasoningFormatFromName(v->get<std::string>());
    if (!out->reasoning_format) {
      return InvalidRequest("Invalid 'reasoning_format': expected 'none', 'auto' or 'deepseek'.", "reasoning_format",
                            "invalid_value");
    }
  }
  if (const json* v = Field(body, "chat_template_kwargs"); v != nullptr && !v->is_null()) {
    if (!v->is_object()) return TypeError("chat_template_kwargs", "an object");
    if (const json* t = Field(*v, "enable_thinking"); t != nullptr && !t->is_null()) {
      if (!t->is_boolean()) return TypeError("chat_template_kwargs.enable_thinking", "a boolean");
      out->enable_thinking = t->get<bool>();
    }
  }
  // OpenAI's field: "none" turns thinking off (as llama-server reads it);
  // the levels are accepted (templates here get no effort hint).
  if (const json* v = Field(body, "reasoning_effort"); v != nullptr && !v->is_null()) {
    if (!v->is_string()) return TypeError("reasoning_effort", "a string");
    if (v->get<std::string>() == "none") out->enable_thinking = false;
  }
  return std::nullopt;
}

MaybeError ParseAssistantReasoning(const json& message, const std::string& param, ChatMessage* msg) {
  const json* v = Field(message, "reasoning_content");
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string()) return TypeError(param + ".reasoning_content", "a string");
  msg->reasoning_content = v->get<std::string>();
  return std::nullopt;
}

}  // namespace agentkv::api
