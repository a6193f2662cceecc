#include "api/anthropic_tools.h"

#include "api/json_fields.h"

namespace agentkv::api {
namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

constexpr size_t kMaxTools = 128;

MaybeError ParseTool(const json& t, const std::string& param, ToolDefinition* out) {
  if (!t.is_object()) return AnthropicTypeError(param, "an object");
  if (const json* type = Field(t, "type")) {
    if (!type->is_string()) return AnthropicTypeError(param + ".type", "a string");
    if (*type != "custom") {
      return AnthropicFieldError(param + ".type",
                                 "'" + type->get<std::string>().substr(0, 40) +
                                     "' tools (Anthropic-defined tools) are not supported; define the tool with "
                                     "name, description and input_schema",
                                 "unsupported");
    }
  }
  if (MaybeError e = RequireStringField(t, "name", param, &out->name, Wording::kAnthropic)) return e;
  if (!ValidToolName(out->name)) {
    return AnthropicFieldError(param + ".name", "must be 1-64 characters of a-z, A-Z, 0-9, _ and -",
                               "invalid_value");
  }
  if (const json* d = Field(t, "description")) {
    if (!d->is_string()) return AnthropicTypeError(param + ".description", "a string");
    out->description = d->get<std::string>();
  }
  const json* schema = Field(t, "input_schema");
  if (schema == nullptr) return AnthropicMissingError(param + ".input_schema");
  if (!schema->is_object()) return AnthropicTypeError(param + ".input_schema", "a JSON Schema object");
  if (const json* st = Field(*schema, "type"); st != nullptr && *st != "object") {
    return AnthropicFieldError(param + ".input_schema.type", "must be 'object'", "invalid_value");
  }
  out->parameters = schema->dump();
  if (const json* s = Field(t, "strict")) {
    if (!s->is_boolean()) return AnthropicTypeError(param + ".strict", "a boolean");
    out->strict = s->get<bool>();
  }
  return std::nullopt;
}

MaybeError ParseToolChoice(const json& body, GenerationRequest* out) {
  out->tool_choice.mode = ToolChoiceMode::kAuto;  // Anthropic's default with tools
  const json* tc = Field(body, "tool_choice");
  if (tc == nullptr) return std::nullopt;
  if (!tc->is_object()) return AnthropicTypeError("tool_choice", "an object");
  const json* type = Field(*tc, "type");
  if (type == nullptr || !type->is_string()) return AnthropicTypeError("tool_choice.type", "a string");
  const std::string& t = type->get_ref<const std::string&>();
  if (t == "auto") {
    out->tool_choice.mode = ToolChoiceMode::kAuto;
  } else if (t == "none") {
    out->tool_choice.mode = ToolChoiceMode::kNone;
  } else if (t == "any") {
    out->tool_choice.mode = ToolChoiceMode::kRequired;
  } else if (t == "tool") {
    out->tool_choice.mode = ToolChoiceMode::kFunction;
    if (MaybeError e =
            RequireStringField(*tc, "name", "tool_choice", &out->tool_choice.function, Wording::kAnthropic)) {
      return e;
    }
    bool known = false;
    for (const ToolDefinition& d : out->tools) known = known || d.name == out->tool_choice.function;
    if (!known) {
      return AnthropicFieldError("tool_choice.name",
                                 "'" + out->tool_choice.function.substr(0, 64) + "' is not one of the tools",
                                 "invalid_value");
    }
  } else {
    return AnthropicFieldError("tool_choice.type", "must be 'auto', 'any', 'tool' or 'none'", "invalid_value");
  }
  if (out->tools.empty() && (t == "any" || t == "tool")) {
    return AnthropicFieldError("tool_choice", "tool_choice '" + t + "' needs a non-empty 'tools'", "invalid_value");
  }
  if (const json* d = Field(*tc, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) return AnthropicTypeError("tool_choice.disable_parallel_tool_use", "a boolean");
    out->parallel_tool_calls = !d->get<bool>();
  }
  return std::nullopt;
}

}  // namespace

MaybeError BlockType(const json& block, const std::string& param, std::string* type) {
  if (!block.is_object()) return AnthropicTypeError(param, "an object");
  const json* t = Field(block, "type");
  if (t == nullptr || !t->is_string()) return AnthropicTypeError(param + ".type", "a string");
  *type = t->get<std::string>();
  return std::nullopt;
}

MaybeError StringOrTextBlocks(const json& value, const std::string& param, const char* where, std::string* out) {
  if (value.is_string()) {
    *out = value.get<std::string>();
    return std::nullopt;
  }
  if (!value.is_array()) return AnthropicTypeError(param, "a string or an array of text blocks");
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string bp = param + "." + std::to_string(i);
    std::string type;
    if (MaybeError e = BlockType(value[i], bp, &type)) return e;
    if (type != "text") {
      return AnthropicFieldError(
          bp + ".type", "'" + type.substr(0, 40) + "' blocks are not supported in " + where + "; only text",
          "unsupported");
    }
    std::string text;
    if (MaybeError e = TextOfBlock(value[i], bp, &text)) return e;
    if (i > 0) out->push_back('\n');
    out->append(text);
  }
  return std::nullopt;
}

MaybeError TextOfBlock(const json& block, const std::string& param, std::string* out) {
  const json* text = Field(block, "text");
  if (text == nullptr || !text->is_string()) return AnthropicTypeError(param + ".text", "a string");
  *out = text->get<std::string>();
  return std::nullopt;
}

MaybeError ParseAnthropicTools(const json& body, GenerationRequest* out) {
  if (const json* tools = Field(body, "tools")) {
    if (!tools->is_array()) return AnthropicTypeError("tools", "an array");
    if (tools->size() > kMaxTools) return AnthropicFieldError("tools", "at most 128 tools", "invalid_value");
    for (size_t i = 0; i < tools->size(); ++i) {
      ToolDefinition t;
      if (MaybeError e = ParseTool((*tools)[i], "tools." + std::to_string(i), &t)) return e;
      for (const ToolDefinition& other : out->tools) {
        if (other.name == t.name) {
          return AnthropicFieldError("tools", "tool names must be unique ('" + t.name + "' repeats)",
                                     "invalid_value");
        }
      }
      out->tools.push_back(std::move(t));
    }
  }
  return ParseToolChoice(body, out);
}

MaybeError ParseToolUseBlock(const json& block, const std::string& param, ToolCall* out) {
  if (MaybeError e = RequireStringField(block, "id", param, &out->id, Wording::kAnthropic)) return e;
  if (MaybeError e = RequireStringField(block, "name", param, &out->name, Wording::kAnthropic)) return e;
  const json* input = Field(block, "input");
  if (input == nullptr) return AnthropicMissingError(param + ".input");
  if (!input->is_object()) return AnthropicTypeError(param + ".input", "an object");
  out->arguments = input->dump();
  return std::nullopt;
}

MaybeError ParseToolResultBlock(const json& block, const std::string& param, ChatMessage* out) {
  out->role = Role::kTool;
  if (MaybeError e = RequireStringField(block, "tool_use_id", param, &out->tool_call_id, Wording::kAnthropic)) return e;
  std::string content;
  if (const json* c = Field(block, "content")) {
    if (MaybeError e = StringOrTextBlocks(*c, param + ".content", "tool results", &content)) return e;
  }
  if (const json* err = Field(block, "is_error")) {
    if (!err->is_boolean()) return AnthropicTypeError(param + ".is_error", "a boolean");
    if (err->get<bool>()) content = "Error: " + content;
  }
  out->content = std::move(content);
  return std::nullopt;
}

std::string AnthropicToolUseId(std::string_view call_id) {
  constexpr std::string_view kCall = "call_";
  if (call_id.substr(0, kCall.size()) == kCall) return "toolu_" + std::string(call_id.substr(kCall.size()));
  return std::string(call_id);
}

}  // namespace agentkv::api
