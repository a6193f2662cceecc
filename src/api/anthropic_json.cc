// POST /v1/messages request parsing. Every check names the offending field
// (Anthropic's messages say "messages.1.content.0.type: ..."), all before
// any model work.

#include "api/anthropic_json.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

namespace agentkv::api {
namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

constexpr int64_t kMaxTokensLimit = int64_t{1} << 30;
constexpr size_t kMaxStopSequences = 16;

const json* Field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

ApiError Invalid(const std::string& param, const std::string& what, const char* code) {
  return InvalidRequest(param + ": " + what, param, code);
}
ApiError TypeError(const std::string& param, const char* expected) {
  return Invalid(param, std::string("must be ") + expected, "invalid_type");
}
ApiError Unsupported(const std::string& param, const std::string& what) {
  return Invalid(param, what, "unsupported");
}

MaybeError GetNumber(const json& body, const char* name, double lo, double hi, bool lo_open, float* out) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return TypeError(name, "a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || (lo_open ? d <= lo : d < lo) || d > hi) {
    return Invalid(name, std::string("must be in ") + (lo_open ? "(" : "[") + json(lo).dump() + ", " +
                             json(hi).dump() + "]",
                   "invalid_value");
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

MaybeError GetInt(const json& v, const std::string& name, int64_t lo, int64_t hi, int64_t* out) {
  if (!v.is_number_integer()) return TypeError(name, "an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return Invalid(name, "must be at most " + std::to_string(hi), "invalid_value");
  }
  *out = v.get<int64_t>();
  if (*out < lo || *out > hi) {
    return Invalid(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", "invalid_value");
  }
  return std::nullopt;
}

// A text block {"type":"text","text":...}; cache_control and citations are
// accepted and ignored.
MaybeError TextOfBlock(const json& block, const std::string& param, std::string* out) {
  const json* text = Field(block, "text");
  if (text == nullptr || !text->is_string()) return TypeError(param + ".text", "a string");
  *out = text->get<std::string>();
  return std::nullopt;
}

// system: a string or an array of text blocks (joined with "\n").
MaybeError ParseSystem(const json& body, std::string* out) {
  const json* s = Field(body, "system");
  if (s == nullptr) return std::nullopt;
  if (s->is_string()) {
    *out = s->get<std::string>();
    return std::nullopt;
  }
  if (!s->is_array()) return TypeError("system", "a string or an array of text blocks");
  for (size_t i = 0; i < s->size(); ++i) {
    const json& b = (*s)[i];
    const std::string param = "system." + std::to_string(i);
    if (!b.is_object()) return TypeError(param, "an object");
    const json* type = Field(b, "type");
    if (type == nullptr || !type->is_string() || *type != "text") {
      return Unsupported(param + ".type", "only text blocks are supported in system");
    }
    std::string text;
    if (MaybeError e = TextOfBlock(b, param, &text)) return e;
    if (i > 0) out->push_back('\n');
    out->append(text);
  }
  return std::nullopt;
}

// One message's content: a string, or blocks. Text blocks are joined with
// "\n" (as OpenAI text parts are, so the same conversation renders the same
// prompt through either API and shares its cache); an assistant's thinking
// blocks are the model's private reasoning and are dropped.
MaybeError ParseContent(const json& msg, const std::string& param, Role role, std::string* out) {
  const json* c = Field(msg, "content");
  if (c == nullptr) return Invalid(param + ".content", "Field required", "missing_required_parameter");
  if (c->is_string()) {
    *out = c->get<std::string>();
    return std::nullopt;
  }
  if (!c->is_array()) return TypeError(param + ".content", "a string or an array of content blocks");
  bool first = true;
  for (size_t i = 0; i < c->size(); ++i) {
    const json& b = (*c)[i];
    const std::string bp = param + ".content." + std::to_string(i);
    if (!b.is_object()) return TypeError(bp, "an object");
    const json* type = Field(b, "type");
    if (type == nullptr || !type->is_string()) return TypeError(bp + ".type", "a string");
    const std::string& t = type->get_ref<const std::string&>();
    if (t == "text") {
      std::string text;
      if (MaybeError e = TextOfBlock(b, bp, &text)) return e;
      if (!first) out->push_back('\n');
      out->append(text);
      first = false;
    } else if ((t == "thinking" || t == "redacted_thinking") && role == Role::kAssistant) {
      continue;
    } else if (t == "tool_use" || t == "tool_result") {
      return Unsupported(bp + ".type", "'" + t + "' blocks are not supported yet (tools are refused, see docs/api.md)");
    } else {
      return Unsupported(bp + ".type", "'" + t.substr(0, 40) + "' blocks are not supported; only text");
    }
  }
  return std::nullopt;
}

MaybeError ParseMessages(const json& body, std::vector<ChatMessage>* out) {
  const json* msgs = Field(body, "messages");
  if (msgs == nullptr) return Invalid("messages", "Field required", "missing_required_parameter");
  if (!msgs->is_array()) return TypeError("messages", "an array");
  if (msgs->empty()) return Invalid("messages", "at least one message is required", "invalid_value");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string param = "messages." + std::to_string(i);
    if (!m.is_object()) return TypeError(param, "an object");
    const json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) return TypeError(param + ".role", "a string");
    const std::string& r = role->get_ref<const std::string&>();
    ChatMessage msg;
    if (r == "user") {
      msg.role = Role::kUser;
    } else if (r == "assistant") {
      msg.role = Role::kAssistant;
    } else {
      return Invalid(param + ".role",
                     "'" + r.substr(0, 32) + "' is not a valid role (user or assistant; the system prompt goes in "
                     "the top-level 'system' field)",
                     "invalid_value");
    }
    if (MaybeError e = ParseContent(m, param, msg.role, &msg.content)) return e;
    out->push_back(std::move(msg));
  }
  if (out->back().role == Role::kAssistant) {
    return Unsupported("messages." + std::to_string(msgs->size() - 1),
                       "a final assistant message (prefill) is not supported; end with a user message");
  }
  return std::nullopt;
}

MaybeError ParseStopSequences(const json& body, std::vector<std::string>* out) {
  const json* v = Field(body, "stop_sequences");
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) return TypeError("stop_sequences", "an array of strings");
  if (v->size() > kMaxStopSequences) return Invalid("stop_sequences", "at most 16 strings", "invalid_value");
  for (const json& s : *v) {
    if (!s.is_string()) return TypeError("stop_sequences", "an array of strings");
    if (s.get_ref<const std::string&>().empty()) {
      return Invalid("stop_sequences", "each stop sequence must be non-empty", "invalid_value");
    }
    out->push_back(s.get<std::string>());
  }
  return std::nullopt;
}

// Tools: refused until the tool layer (issue 13's other half) lands. An
// empty tools array, or tool_choice "none"/"auto" without tools, is harmless.
MaybeError CheckTools(const json& body) {
  const json* tools = Field(body, "tools");
  if (tools != nullptr && !(tools->is_array() && tools->empty())) {
    return Unsupported("tools", "tools are not supported by this server yet (see docs/api.md)");
  }
  if (const json* tc = Field(body, "tool_choice")) {
    const json* type = tc->is_object() ? Field(*tc, "type") : nullptr;
    if (type == nullptr || !type->is_string()) return TypeError("tool_choice.type", "a string");
    if (*type != "none" && *type != "auto") {
      return Unsupported("tool_choice", "tool_choice needs tools, which are not supported yet");
    }
  }
  if (const json* mcp = Field(body, "mcp_servers"); mcp != nullptr && !(mcp->is_array() && mcp->empty())) {
    return Unsupported("mcp_servers", "MCP servers are not supported");
  }
  return std::nullopt;
}

MaybeError ParseRequest(const json& body, const ParseContext& ctx, GenerationRequest* out,
                        std::string* model_echo) {
  const json* model = Field(body, "model");
  if (model == nullptr) return Invalid("model", "Field required", "missing_required_parameter");
  if (!model->is_string()) return TypeError("model", "a string");
  *model_echo = model->get<std::string>();
  if (MaybeError e = CheckModel(*model_echo, ctx)) return e;

  const json* mt = Field(body, "max_tokens");
  if (mt == nullptr) return Invalid("max_tokens", "Field required", "missing_required_parameter");
  int64_t max_tokens = 0;
  if (MaybeError e = GetInt(*mt, "max_tokens", 1, kMaxTokensLimit, &max_tokens)) return e;
  out->sampling.max_tokens = static_cast<int32_t>(max_tokens);

  out->kind = RequestKind::kChat;
  std::string system;
  if (MaybeError e = ParseSystem(body, &system)) return e;
  if (!system.empty()) out->messages.push_back(ChatMessage{Role::kSystem, std::move(system)});
  if (MaybeError e = ParseMessages(body, &out->messages)) return e;
  if (MaybeError e = CheckTools(body)) return e;

  SamplingParams& s = out->sampling;
  if (MaybeError e = GetNumber(body, "temperature", 0.0, 1.0, false, &s.temperature)) return e;
  if (MaybeError e = GetNumber(body, "top_p", 0.0, 1.0, true, &s.top_p)) return e;
  if (const json* v = Field(body, "top_k")) {
    int64_t k = 0;
    if (MaybeError e = GetInt(*v, "top_k", 0, std::numeric_limits<int32_t>::max(), &k)) return e;
    s.top_k = static_cast<int32_t>(k);
  }
  if (MaybeError e = ParseStopSequences(body, &s.stop)) return e;
  if (const json* v = Field(body, "stream")) {
    if (!v->is_boolean()) return TypeError("stream", "a boolean");
    out->stream = v->get<bool>();
  }
  if (const json* v = Field(body, "metadata")) {
    if (!v->is_object()) return TypeError("metadata", "an object");
    if (const json* u = Field(*v, "user_id"); u != nullptr && !u->is_string()) {
      return TypeError("metadata.user_id", "a string");
    }
  }
  if (const json* v = Field(body, "thinking"); v != nullptr && !v->is_object()) {
    return TypeError("thinking", "an object");
  }

  std::optional<std::string> body_ids[2];
  const char* names[2] = {"agent_id", "session_id"};
  for (int i = 0; i < 2; ++i) {
    const json* v = Field(body, names[i]);
    if (v == nullptr) continue;
    if (!v->is_string()) return TypeError(names[i], "a string");
    body_ids[i] = v->get<std::string>();
  }
  return ResolveRequestAgent(ctx, std::move(body_ids[0]), std::move(body_ids[1]), out);
}

}  // namespace

MaybeError ParseMessagesRequest(std::string_view body, const ParseContext& ctx, GenerationRequest* out,
                                std::string* model_echo) {
  try {
    json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return InvalidRequest("The request body is not valid JSON.", "", "invalid_json");
    if (!j.is_object()) return InvalidRequest("The request body must be a JSON object.", "", "invalid_json");
    return ParseRequest(j, ctx, out, model_echo);
  } catch (const std::exception& ex) {  // a type check we missed: still a 400
    return InvalidRequest(std::string("Invalid request: ") + ex.what(), "");
  }
}

}  // namespace agentkv::api
