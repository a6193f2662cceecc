#include "api/openai_tools.h"

#include "api/bounded_json.h"
#include "api/json_fields.h"

namespace agentkv::api {
namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

constexpr size_t kMaxTools = 128;

MaybeError ParseTool(const json& t, const std::string& param, ToolDefinition* out) {
  if (!t.is_object()) return TypeError(param, "an object");
  const json* type = Field(t, "type");
  if (type == nullptr || !type->is_string() || *type != "function") {
    return UnsupportedError("Only tools of type 'function' are supported.", param + ".type");
  }
  const json* fn = Field(t, "function");
  if (fn == nullptr || !fn->is_object()) return TypeError(param + ".function", "an object");
  if (MaybeError e = RequireStringField(*fn, "name", param + ".function", &out->name)) return e;
  if (!ValidToolName(out->name)) {
    return InvalidRequest("'" + param + ".function.name' must be 1-64 characters of a-z, A-Z, 0-9, _ and -.",
                          param + ".function.name", "invalid_value");
  }
  return ParseFunctionToolFields(*fn, param + ".function", out);
}

MaybeError ParseToolChoice(const json& body, GenerationRequest* out) {
  const json* v = Field(body, "tool_choice");
  if (v == nullptr) {
    out->tool_choice.mode = ToolChoiceMode::kAuto;  // OpenAI: "auto" with tools, "none" without
    return std::nullopt;
  }
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (s == "auto") {
      out->tool_choice.mode = ToolChoiceMode::kAuto;
    } else if (s == "none") {
      out->tool_choice.mode = ToolChoiceMode::kNone;
    } else if (s == "required") {
      out->tool_choice.mode = ToolChoiceMode::kRequired;
    } else {
      return InvalidRequest("'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\":\"function\",...}.",
                            "tool_choice", "invalid_value");
    }
  } else if (v->is_object()) {
    const json* type = Field(*v, "type");
    if (type == nullptr || !type->is_string() || *type != "function") {
      return UnsupportedError("Only tool_choice {\"type\":\"function\",\"function\":{\"name\":...}} is supported.",
                              "tool_choice.type");
    }
    const json* fn = Field(*v, "function");
    if (fn == nullptr || !fn->is_object()) return TypeError("tool_choice.function", "an object");
    if (MaybeError e = RequireStringField(*fn, "name", "tool_choice.function", &out->tool_choice.function)) return e;
    out->tool_choice.mode = ToolChoiceMode::kFunction;
    bool known = false;
    for (const ToolDefinition& t : out->tools) known = known || t.name == out->tool_choice.function;
    if (!known) {
      return InvalidRequest("'tool_choice' names the function '" + out->tool_choice.function.substr(0, 64) +
                                "', which is not in 'tools'.",
                            "tool_choice.function.name", "invalid_value");
    }
  } else {
    return TypeError("tool_choice", "a string or an object");
  }
  if (out->tools.empty() && out->tool_choice.mode == ToolChoiceMode::kRequired) {
    return InvalidRequest("'tool_choice' \"required\" needs a non-empty 'tools'.", "tool_choice", "invalid_value");
  }
  return std::nullopt;
}

MaybeError ParseResponseFormat(const json& body, ResponseFormat* out) {
  const json* v = Field(body, "response_format");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return TypeError("response_format", "an object");
  const json* type = Field(*v, "type");
  if (type == nullptr || !type->is_string()) return TypeError("response_format.type", "a string");
  if (*type == "text") {
    out->type = ResponseFormatType::kText;
  } else if (*type == "json_object") {
    out->type = ResponseFormatType::kJsonObject;
  } else if (*type == "json_schema") {
    out->type = ResponseFormatType::kJsonSchema;
    const json* js = Field(*v, "json_schema");
    if (js == nullptr || !js->is_object()) return TypeError("response_format.json_schema", "an object");
    if (MaybeError e = RequireStringField(*js, "name", "response_format.json_schema", &out->name)) return e;
    const json* schema = Field(*js, "schema");
    if (schema == nullptr) {
      out->schema = "{\"type\":\"object\"}";  // OpenAI: schema is optional
    } else if (!schema->is_object()) {
      return TypeError("response_format.json_schema.schema", "a JSON Schema object");
    } else {
      out->schema = schema->dump();
    }
    if (const json* s = Field(*js, "strict")) {
      if (!s->is_boolean()) return TypeError("response_format.json_schema.strict", "a boolean");
      out->strict = s->get<bool>();
    }
  } else {
    return InvalidRequest("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\".",
                          "response_format.type", "invalid_value");
  }
  return std::nullopt;
}

}  // namespace

MaybeError ParseFunctionToolFields(const json& fn, const std::string& param, ToolDefinition* out) {
  if (const json* d = Field(fn, "description")) {
    if (!d->is_string()) return TypeError(param + ".description", "a string");
    out->description = d->get<std::string>();
  }
  if (const json* p = Field(fn, "parameters")) {
    if (!p->is_object()) return TypeError(param + ".parameters", "a JSON Schema object");
    out->parameters = p->dump();
  }
  if (const json* s = Field(fn, "strict")) {
    if (!s->is_boolean()) return TypeError(param + ".strict", "a boolean");
    out->strict = s->get<bool>();
  }
  return std::nullopt;
}

MaybeError ParseAssistantToolCalls(const json& m, const std::string& param, ChatMessage* msg) {
  if (Field(m, "function_call") != nullptr) {
    return UnsupportedError("The legacy 'function_call' is not supported; use 'tool_calls'.", param + ".function_call");
  }
  const json* calls = Field(m, "tool_calls");
  if (calls == nullptr) return std::nullopt;
  if (!calls->is_array()) return TypeError(param + ".tool_calls", "an array");
  for (size_t i = 0; i < calls->size(); ++i) {
    const json& c = (*calls)[i];
    const std::string cp = param + ".tool_calls[" + std::to_string(i) + "]";
    if (!c.is_object()) return TypeError(cp, "an object");
    const json* type = Field(c, "type");
    if (type != nullptr && (!type->is_string() || *type != "function")) {
      return UnsupportedError("Only tool calls of type 'function' are supported.", cp + ".type");
    }
    ToolCall call;
    if (MaybeError e = RequireStringField(c, "id", cp, &call.id)) return e;
    const json* fn = Field(c, "function");
    if (fn == nullptr || !fn->is_object()) return TypeError(cp + ".function", "an object");
    if (MaybeError e = RequireStringField(*fn, "name", cp + ".function", &call.name)) return e;
    if (MaybeError e = RequireStringField(*fn, "arguments", cp + ".function", &call.arguments)) return e;
    if (MaybeError e = CheckEchoedArguments(call.arguments, cp + ".function.arguments")) return e;
    msg->tool_calls.push_back(std::move(call));
  }
  return std::nullopt;
}

MaybeError ParseToolMessage(const json& m, const std::string& param, ChatMessage* msg) {
  if (MaybeError e = RequireStringField(m, "tool_call_id", param, &msg->tool_call_id)) return e;
  if (const json* n = Field(m, "name")) {
    if (!n->is_string()) return TypeError(param + ".name", "a string");
    msg->tool_name = n->get<std::string>();
  }
  return std::nullopt;
}

MaybeError ParseToolsAndFormat(const json& body, GenerationRequest* out) {
  for (const char* legacy : {"functions", "function_call"}) {
    if (Field(body, legacy) != nullptr) {
      return UnsupportedError(
          std::string("The legacy '") + legacy + "' is not supported; use 'tools' and 'tool_choice'.", legacy);
    }
  }
  if (const json* tools = Field(body, "tools")) {
    if (!tools->is_array()) return TypeError("tools", "an array");
    if (tools->size() > kMaxTools) {
      return InvalidRequest("'tools' may hold at most 128 functions.", "tools", "invalid_value");
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      ToolDefinition t;
      if (MaybeError e = ParseTool((*tools)[i], "tools[" + std::to_string(i) + "]", &t)) return e;
      for (const ToolDefinition& other : out->tools) {
        if (other.name == t.name) {
          return InvalidRequest("Two tools are named '" + t.name + "'.", "tools", "invalid_value");
        }
      }
      out->tools.push_back(std::move(t));
    }
  }
  if (MaybeError e = ParseToolChoice(body, out)) return e;
  if (const json* p = Field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) return TypeError("parallel_tool_calls", "a boolean");
    out->parallel_tool_calls = p->get<bool>();
  }
  if (MaybeError e = ParseResponseFormat(body, &out->response_format)) return e;
  const bool forced = out->tool_choice.mode == ToolChoiceMode::kRequired ||
                      out->tool_choice.mode == ToolChoiceMode::kFunction ||
                      (out->tool_choice.mode == ToolChoiceMode::kAuto && !out->tools.empty());
  if (out->response_format.type != ResponseFormatType::kText && forced) {
    return UnsupportedError(
        "A JSON 'response_format' together with callable 'tools' is not supported; send "
        "tool_choice \"none\" or leave out one of them.",
        "response_format");
  }
  return std::nullopt;
}

}  // namespace agentkv::api
