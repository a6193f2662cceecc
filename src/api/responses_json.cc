// POST /v1/responses request parsing (the input items: responses_input.cc).
// Every check names the offending field, all before any model work.

#include "api/responses_json.h"

#include <cstdint>

#include "api/bounded_json.h"
#include "util/names.h"
#include "api/json_fields.h"
#include "api/openai_tools.h"
#include "api/responses_input.h"
#include "util/hash.h"

namespace agentkv::api {
namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

constexpr size_t kMaxTools = 128;

// Tool types Codex sends whose calls are not function calls: web_search (run
// by OpenAI's servers, when enabled), local_shell (codex-mini models) and
// custom (freeform apply_patch, gpt-5-codex models). Refusing them would make
// Codex unusable under those model names; ignored, the model is not offered
// them and works with the function tools (Codex's shell among them).
bool IgnoredToolType(const std::string& t) {
  return t == "web_search" || t == "web_search_preview" || t == "local_shell" || t == "custom";
}

MaybeError ParseTool(const json& t, const std::string& param, const std::string& ns, GenerationRequest* out,
                     ResponsesMeta* meta, json* echo);

// {type:"namespace", name, description, tools:[function | custom]}: its
// functions become tools named "<namespace>__<name>" (NamespacedToolName).
MaybeError ParseNamespace(const json& t, const std::string& param, GenerationRequest* out, ResponsesMeta* meta,
                          json* echo) {
  std::string ns;
  if (MaybeError e = RequireStringField(t, "name", param, &ns)) return e;
  const json* tools = Field(t, "tools");
  if (tools == nullptr || !tools->is_array()) return TypeError(param + ".tools", "an array of tools");
  json flattened = json::array();  // the Response echoes the namespace as sent
  for (size_t i = 0; i < tools->size(); ++i) {
    if (MaybeError e =
            ParseTool((*tools)[i], param + ".tools[" + std::to_string(i) + "]", ns, out, meta, &flattened)) {
      return e;
    }
  }
  echo->push_back(t);
  return std::nullopt;
}

MaybeError ParseTool(const json& t, const std::string& param, const std::string& ns, GenerationRequest* out,
                     ResponsesMeta* meta, json* echo) {
  {
    if (!t.is_object()) return TypeError(param, "an object");
    const json* type = Field(t, "type");
    if (type == nullptr || !type->is_string()) return TypeError(param + ".type", "a string");
    const std::string& ty = type->get_ref<const std::string&>();
    if (IgnoredToolType(ty)) return std::nullopt;
    if (ty == "namespace" && ns.empty()) return ParseNamespace(t, param, out, meta, echo);
    if (ty != "function") {
      return UnsupportedError("Tools of type '" + ty.substr(0, 40) +
                                  "' are not supported; only 'function' and 'namespace' (web_search, local_shell and "
                                  "custom are ignored; see docs/api.md).",
                              param + ".type");
    }
    ToolDefinition def;
    if (MaybeError e = RequireStringField(t, "name", param, &def.name)) return e;
    if (!ns.empty()) {
      meta->namespaced[NamespacedToolName(ns, def.name)] = {ns, def.name};
      def.name = NamespacedToolName(ns, def.name);
    }
    if (!ValidToolName(def.name)) {
      return InvalidValueError("'" + param + ".name' must be 1-64 characters of a-z, A-Z, 0-9, _ and -.",
                               param + ".name");
    }
    if (MaybeError e = ParseFunctionToolFields(t, param, &def)) return e;
    for (const ToolDefinition& other : out->tools) {
      if (other.name == def.name) return InvalidValueError("Two tools are named '" + def.name + "'.", "tools");
    }
    if (out->tools.size() == kMaxTools) return InvalidValueError("'tools' may hold at most 128 functions.", "tools");
    echo->push_back({{"type", "function"},
                     {"name", def.name},
                     {"description", def.description.empty() ? json(nullptr) : json(def.description)},
                     {"parameters", def.parameters.empty() ? json(nullptr) : json::parse(def.parameters)},
                     {"strict", def.strict}});
    out->tools.push_back(std::move(def));
  }
  return std::nullopt;
}

MaybeError ParseTools(const json& body, GenerationRequest* out, ResponsesMeta* meta, json* echo) {
  const json* tools = Field(body, "tools");
  *echo = json::array();
  if (tools == nullptr) return std::nullopt;
  if (!tools->is_array()) return TypeError("tools", "an array");
  for (size_t i = 0; i < tools->size(); ++i) {
    if (MaybeError e = ParseTool((*tools)[i], "tools[" + std::to_string(i) + "]", "", out, meta, echo)) return e;
  }
  return std::nullopt;
}

MaybeError ParseToolChoice(const json& body, GenerationRequest* out, json* echo) {
  const json* v = Field(body, "tool_choice");
  *echo = "auto";
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (s == "auto") {
      out->tool_choice.mode = ToolChoiceMode::kAuto;
    } else if (s == "none") {
      out->tool_choice.mode = ToolChoiceMode::kNone;
    } else if (s == "required") {
      out->tool_choice.mode = ToolChoiceMode::kRequired;
      if (out->tools.empty()) {
        return InvalidValueError("'tool_choice' \"required\" needs function tools.", "tool_choice");
      }
    } else {
      return InvalidValueError(
          "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"name\"}.", "tool_choice");
    }
  } else if (v->is_object()) {
    const json* type = Field(*v, "type");
    if (type == nullptr || !type->is_string() || *type != "function") {
      return UnsupportedError("Only tool_choice {\"type\":\"function\",\"name\":...} is supported.",
                              "tool_choice.type");
    }
    if (MaybeError e = RequireStringField(*v, "name", "tool_choice", &out->tool_choice.function)) return e;
    out->tool_choice.mode = ToolChoiceMode::kFunction;
    bool known = false;
    for (const ToolDefinition& t : out->tools) known = known || t.name == out->tool_choice.function;
    if (!known) {
      return InvalidValueError("'tool_choice' names the function '" + out->tool_choice.function.substr(0, 64) +
                                   "', which is not in 'tools'.",
                               "tool_choice.name");
    }
  } else {
    return TypeError("tool_choice", "a string or an object");
  }
  *echo = *v;
  return std::nullopt;
}

// text.format: {type: text | json_object | json_schema (name, schema,
// strict, description)}; text.verbosity is accepted.
MaybeError ParseTextFormat(const json& body, GenerationRequest* out, json* echo) {
  *echo = {{"format", {{"type", "text"}}}};
  const json* text = Field(body, "text");
  if (text == nullptr) return std::nullopt;
  if (!text->is_object()) return TypeError("text", "an object");
  *echo = *text;
  const json* f = Field(*text, "format");
  if (f == nullptr) {
    (*echo)["format"] = {{"type", "text"}};
    return std::nullopt;
  }
  if (!f->is_object()) return TypeError("text.format", "an object");
  const json* type = Field(*f, "type");
  if (type == nullptr || !type->is_string()) return TypeError("text.format.type", "a string");
  ResponseFormat& rf = out->response_format;
  if (*type == "text") {
    rf.type = ResponseFormatType::kText;
  } else if (*type == "json_object") {
    rf.type = ResponseFormatType::kJsonObject;
  } else if (*type == "json_schema") {
    rf.type = ResponseFormatType::kJsonSchema;
    if (MaybeError e = RequireStringField(*f, "name", "text.format", &rf.name)) return e;
    const json* schema = Field(*f, "schema");
    if (schema == nullptr) return MissingError("text.format.schema");
    if (!schema->is_object()) return TypeError("text.format.schema", "a JSON Schema object");
    rf.schema = schema->dump();
    if (const json* s = Field(*f, "strict")) {
      if (!s->is_boolean()) return TypeError("text.format.strict", "a boolean");
      rf.strict = s->get<bool>();
    }
  } else {
    return InvalidValueError("'text.format.type' must be \"text\", \"json_object\" or \"json_schema\".",
                             "text.format.type");
  }
  const bool callable = !out->tools.empty() && out->tool_choice.mode != ToolChoiceMode::kNone;
  if (rf.type != ResponseFormatType::kText && callable) {
    return UnsupportedError(
        "A JSON 'text.format' together with callable 'tools' is not supported; send tool_choice "
        "\"none\" or leave out one of them.",
        "text.format");
  }
  return std::nullopt;
}

// Features that need state kept by the server (agentkv keeps none) or that
// agentkv lacks: refused rather than silently dropped.
MaybeError CheckUnsupported(const json& body) {
  for (const char* name : {"previous_response_id", "conversation", "prompt"}) {
    if (Field(body, name) != nullptr) {
      return UnsupportedError(std::string("'") + name +
                                  "' is not supported: agentkv stores no responses; send the whole conversation in "
                                  "'input' (store: false).",
                              name);
    }
  }
  if (const json* v = Field(body, "background")) {
    if (!v->is_boolean()) return TypeError("background", "a boolean");
    if (v->get<bool>()) return UnsupportedError("'background' responses are not supported.", "background");
  }
  if (const json* v = Field(body, "top_logprobs")) {
    if (!v->is_number_integer()) return TypeError("top_logprobs", "an integer");
    if (v->get<int64_t>() != 0) return UnsupportedError("'top_logprobs' is not supported.", "top_logprobs");
  }
  return std::nullopt;
}

// Accepted and echoed, without effect: metadata, user, include, truncation,
// service_tier, safety_identifier, max_tool_calls, prompt_cache_retention.
MaybeError CheckEchoed(const json& body, json* echo) {
  if (const json* v = Field(body, "metadata")) {
    if (!v->is_object()) return TypeError("metadata", "an object");
    (*echo)["metadata"] = *v;
  }
  for (const char* name : {"user", "service_tier", "safety_identifier", "truncation", "prompt_cache_retention"}) {
    if (const json* v = Field(body, name)) {
      if (!v->is_string()) return TypeError(name, "a string");
      (*echo)[name] = *v;
    }
  }
  if (const json* v = Field(body, "include")) {
    if (!v->is_array()) return TypeError("include", "an array of strings");
    for (const json& s : *v) {
      if (!s.is_string()) return TypeError("include", "an array of strings");
    }
  }
  if (const json* v = Field(body, "max_tool_calls")) {
    if (!v->is_number_integer()) return TypeError("max_tool_calls", "an integer");
    (*echo)["max_tool_calls"] = *v;
  }
  return std::nullopt;
}

MaybeError ParseReasoning(const json& body, GenerationRequest* out, json* echo) {
  const json* v = Field(body, "reasoning");
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return TypeError("reasoning", "an object");
  if (const json* e = Field(*v, "effort")) {
    if (!e->is_string()) return TypeError("reasoning.effort", "a string");
    // As reasoning_effort on the chat route: "none" turns thinking off; the
    // levels reach no template.
    if (e->get<std::string>() == "none") out->enable_thinking = false;
  }
  (*echo)["reasoning"] = *v;
  return std::nullopt;
}

// agentkv's ids and the coding agents' headers first (agent_identity.h);
// then prompt_cache_key, the client's own name for the conversation (Codex
// sends its conversation id), as a tool's value: verbatim when a valid agent
// id, else "h-" + its hash.
MaybeError ParseAgent(const json& body, const ParseContext& ctx, GenerationRequest* out) {
  std::optional<std::string> body_ids[2];
  const char* names[2] = {"agent_id", "session_id"};
  for (int i = 0; i < 2; ++i) {
    const json* v = Field(body, names[i]);
    if (v == nullptr) continue;
    if (!v->is_string()) return TypeError(names[i], "a string");
    body_ids[i] = v->get<std::string>();
  }
  if (MaybeError e = ResolveRequestAgent(ctx, std::move(body_ids[0]), std::move(body_ids[1]), out)) return e;
  const json* key = Field(body, "prompt_cache_key");
  if (key == nullptr) return std::nullopt;
  if (!key->is_string()) return TypeError("prompt_cache_key", "a string");
  const std::string& k = key->get_ref<const std::string&>();
  if (out->agent_id.empty() && !k.empty()) {
    out->agent_id = ValidateName("id", k).ok() ? k : "h-" + Hex64(Xxh3_64(k));
  }
  return std::nullopt;
}

MaybeError ParseRequest(const json& body, const ParseContext& ctx, GenerationRequest* out, ResponsesMeta* meta) {
  json& echo = meta->echo;
  echo = json::object();
  const json* model = Field(body, "model");
  if (model != nullptr) {
    if (!model->is_string()) return TypeError("model", "a string");
    meta->model = model->get<std::string>();
    if (MaybeError e = CheckModel(meta->model, ctx)) return e;
  } else {
    meta->model = ctx.model_id;
  }
  if (MaybeError e = CheckUnsupported(body)) return e;

  out->kind = RequestKind::kChat;
  echo["instructions"] = nullptr;
  if (const json* v = Field(body, "instructions")) {
    if (!v->is_string()) return TypeError("instructions", "a string");
    if (!v->get_ref<const std::string&>().empty()) {
      ChatMessage sys;
      sys.role = Role::kSystem;
      sys.content = v->get<std::string>();
      out->messages.push_back(std::move(sys));
    }
    echo["instructions"] = *v;
  }
  if (MaybeError e = ParseResponsesInput(body, &out->messages)) return e;
  if (MaybeError e = ParseTools(body, out, meta, &echo["tools"])) return e;
  if (MaybeError e = ParseToolChoice(body, out, &echo["tool_choice"])) return e;
  if (const json* v = Field(body, "parallel_tool_calls")) {
    if (!v->is_boolean()) return TypeError("parallel_tool_calls", "a boolean");
    out->parallel_tool_calls = v->get<bool>();
  }
  echo["parallel_tool_calls"] = out->parallel_tool_calls;
  if (MaybeError e = ParseTextFormat(body, out, &echo["text"])) return e;

  SamplingParams& s = out->sampling;
  echo["max_output_tokens"] = nullptr;
  if (const json* v = Field(body, "max_output_tokens")) {
    if (!v->is_number_integer()) return TypeError("max_output_tokens", "an integer");
    const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(kMaxTokensLimit);
    if (too_big || v->get<int64_t>() < 1 || v->get<int64_t>() > kMaxTokensLimit) {
      return InvalidValueError("'max_output_tokens' must be in [1, " + std::to_string(kMaxTokensLimit) + "].",
                               "max_output_tokens");
    }
    s.max_tokens = static_cast<int32_t>(v->get<int64_t>());
    echo["max_output_tokens"] = *s.max_tokens;
  }
  if (MaybeError e = GetNumberInRange(body, "temperature", 0.0, 2.0, false, &s.temperature)) return e;
  if (MaybeError e = GetNumberInRange(body, "top_p", 0.0, 1.0, true, &s.top_p)) return e;
  // As sent (the float would echo 0.7 as 0.699999988).
  const json* temperature = Field(body, "temperature");
  const json* top_p = Field(body, "top_p");
  echo["temperature"] = temperature != nullptr ? *temperature : json(1.0);
  echo["top_p"] = top_p != nullptr ? *top_p : json(1.0);
  if (const json* v = Field(body, "stream")) {
    if (!v->is_boolean()) return TypeError("stream", "a boolean");
    out->stream = v->get<bool>();
  }
  echo["store"] = false;  // whatever was asked: nothing is kept
  if (const json* v = Field(body, "store"); v != nullptr && !v->is_boolean()) return TypeError("store", "a boolean");
  echo["metadata"] = json::object();
  echo["reasoning"] = nullptr;
  echo["truncation"] = "disabled";
  echo["service_tier"] = "default";
  echo["previous_response_id"] = nullptr;
  if (MaybeError e = CheckEchoed(body, &echo)) return e;
  if (MaybeError e = ParseReasoning(body, out, &echo)) return e;
  if (const json* v = Field(body, "prompt_cache_key"); v != nullptr && v->is_string()) echo["prompt_cache_key"] = *v;
  return ParseAgent(body, ctx, out);
}

}  // namespace

std::optional<ApiError> ParseResponsesRequest(std::string_view body, const ParseContext& ctx,
                                              GenerationRequest* out, ResponsesMeta* meta) {
  return ParseJsonObjectBody(body, [&](const json& j) { return ParseRequest(j, ctx, out, meta); });
}

}  // namespace agentkv::api
