// Request parsing. Each check names the offending field in `param`, so the
// client sees exactly what to fix; all checks run before any model work.

#include "api/openai_json.h"

#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

#include "api/bounded_json.h"
#include "api/json_fields.h"
#include "api/openai_reasoning.h"
#include "api/openai_tools.h"

namespace agentkv::api {
namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

constexpr size_t kMaxStopStrings = 4;

MaybeError RangeError(const std::string& param, const std::string& range) {
  return InvalidRequest("'" + param + "' must be " + range + ".", param, "invalid_value");
}

// Integers only (10.0 is refused, as OpenAI does).
MaybeError GetInt(const json& v, const std::string& param, int64_t lo, int64_t hi, int64_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return RangeError(param, "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    *out = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    *out = v.get<int64_t>();
  } else {
    return TypeError(param, "an integer");
  }
  if (*out < lo || *out > hi) {
    return RangeError(param, "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return std::nullopt;
}

MaybeError GetBool(const json& obj, const char* name, bool* out) {
  const json* v = Field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return TypeError(name, "a boolean");
  *out = v->get<bool>();
  return std::nullopt;
}

MaybeError ParseModel(const json& body, const ParseContext& ctx) {
  const json* v = Field(body, "model");
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return TypeError("model", "a string");
  return CheckModel(v->get_ref<const std::string&>(), ctx);
}

MaybeError ParseAgentId(const json& body, const ParseContext& ctx, GenerationRequest* out) {
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

MaybeError ParseStop(const json& body, std::vector<std::string>* out) {
  const json* v = Field(body, "stop");
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) {
    if (!v->get_ref<const std::string&>().empty()) out->push_back(v->get<std::string>());
    return std::nullopt;
  }
  if (!v->is_array()) return TypeError("stop", "a string or an array of strings");
  if (v->size() > kMaxStopStrings) return RangeError("stop", "at most 4 strings");
  for (const json& s : *v) {
    if (!s.is_string()) return TypeError("stop", "a string or an array of strings");
    if (s.get_ref<const std::string&>().empty()) return RangeError("stop", "non-empty strings");
    out->push_back(s.get<std::string>());
  }
  return std::nullopt;
}

// Chat: `logprobs` (bool) and `top_logprobs` (0..20, only with logprobs:
// true, as OpenAI requires). Completions (the legacy API): `logprobs` is the
// number of alternatives, 0..5. *top_logprobs stays -1 when logprobs are off.
MaybeError ParseLogprobs(const json& body, RequestKind kind, int32_t* top_logprobs) {
  const json* lp = Field(body, "logprobs");
  if (kind == RequestKind::kCompletion) {
    if (lp == nullptr) return std::nullopt;
    int64_t n = 0;
    if (MaybeError e = GetInt(*lp, "logprobs", 0, 5, &n)) return e;
    *top_logprobs = static_cast<int32_t>(n);
    return std::nullopt;
  }
  bool on = false;
  if (lp != nullptr) {
    if (!lp->is_boolean()) return TypeError("logprobs", "a boolean");
    on = lp->get<bool>();
  }
  const json* top = Field(body, "top_logprobs");
  if (top == nullptr) {
    if (on) *top_logprobs = 0;
    return std::nullopt;
  }
  int64_t n = 0;
  if (MaybeError e = GetInt(*top, "top_logprobs", 0, kMaxTopLogprobs, &n)) return e;
  if (!on) {
    return InvalidRequest("'top_logprobs' requires 'logprobs' to be true.", "top_logprobs", "invalid_value");
  }
  *top_logprobs = static_cast<int32_t>(n);
  return std::nullopt;
}

// Fields shared by both endpoints.
MaybeError ParseCommon(const json& body, const ParseContext& ctx, GenerationRequest* out) {
  if (MaybeError e = ParseModel(body, ctx)) return e;
  if (MaybeError e = ParseAgentId(body, ctx, out)) return e;
  SamplingParams& s = out->sampling;
  const json* mct = Field(body, "max_completion_tokens");
  const json* mt = Field(body, "max_tokens");
  if (mct != nullptr || mt != nullptr) {
    const char* param = mct != nullptr ? "max_completion_tokens" : "max_tokens";
    int64_t n = 0;
    if (MaybeError e = GetInt(mct != nullptr ? *mct : *mt, param, 1, kMaxTokensLimit, &n)) return e;
    s.max_tokens = static_cast<int32_t>(n);
  }
  if (MaybeError e = GetNumberInRange(body, "temperature", 0.0, 2.0, false, &s.temperature)) return e;
  if (MaybeError e = GetNumberInRange(body, "top_p", 0.0, 1.0, true, &s.top_p)) return e;
  if (const json* v = Field(body, "top_k")) {
    int64_t k = 0;
    if (MaybeError e = GetInt(*v, "top_k", 0, std::numeric_limits<int32_t>::max(), &k)) return e;
    s.top_k = static_cast<int32_t>(k);
  }
  if (const json* v = Field(body, "seed")) {
    int64_t seed = 0;
    if (MaybeError e = GetInt(*v, "seed", std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max(), &seed)) {
      return e;
    }
    s.seed = seed;
  }
  if (MaybeError e = ParseStop(body, &s.stop)) return e;
  float penalty = 0;  // accepted for compatibility, range-checked, not applied
  if (MaybeError e = GetNumberInRange(body, "presence_penalty", -2.0, 2.0, false, &penalty)) return e;
  if (MaybeError e = GetNumberInRange(body, "frequency_penalty", -2.0, 2.0, false, &penalty)) return e;
  if (const json* v = Field(body, "n")) {
    int64_t n = 0;
    if (MaybeError e = GetInt(*v, "n", 1, 1, &n)) return e;
  }
  if (const json* v = Field(body, "logit_bias"); v != nullptr && !v->empty()) {
    return InvalidRequest("'logit_bias' is not supported.", "logit_bias", "unsupported");
  }
  if (MaybeError e = ParseLogprobs(body, out->kind, &s.top_logprobs)) return e;
  if (MaybeError e = GetBool(body, "stream", &out->stream)) return e;
  if (MaybeError e = GetBool(body, "cache_prompt", &out->reuse_cache)) return e;
  if (const json* v = Field(body, "stream_options")) {
    if (!v->is_object()) return TypeError("stream_options", "an object");
    if (!out->stream) {
      return InvalidRequest("'stream_options' is only allowed when 'stream' is true.",
                            "stream_options", "invalid_value");
    }
    if (const json* u = Field(*v, "include_usage")) {
      if (!u->is_boolean()) return TypeError("stream_options.include_usage", "a boolean");
      out->include_usage = u->get<bool>();
    }
  }
  return std::nullopt;
}

MaybeError ParseContent(const json& msg, const std::string& param, bool null_ok, std::string* out) {
  const json* c = Field(msg, "content");
  if (c == nullptr) {
    if (null_ok) return std::nullopt;
    return TypeError(param + ".content", "a string or an array of text parts");
  }
  if (c->is_string()) {
    *out = c->get<std::string>();
    return std::nullopt;
  }
  if (!c->is_array()) return TypeError(param + ".content", "a string or an array of text parts");
  for (size_t i = 0; i < c->size(); ++i) {
    const json& part = (*c)[i];
    const std::string pp = param + ".content[" + std::to_string(i) + "]";
    if (!part.is_object()) return TypeError(pp, "an object");
    const json* type = Field(part, "type");
    if (type == nullptr || !type->is_string() || *type != "text") {
      return InvalidRequest("Only text content parts are supported.", pp + ".type", "unsupported");
    }
    const json* text = Field(part, "text");
    if (text == nullptr || !text->is_string()) return TypeError(pp + ".text", "a string");
    if (i > 0) out->push_back('\n');
    out->append(text->get_ref<const std::string&>());
  }
  return std::nullopt;
}

MaybeError ParseMessages(const json& body, std::vector<ChatMessage>* out) {
  const json* msgs = Field(body, "messages");
  if (msgs == nullptr) return InvalidRequest("'messages' is required.", "messages", "missing_required_parameter");
  if (!msgs->is_array()) return TypeError("messages", "an array");
  if (msgs->empty()) return RangeError("messages", "a non-empty array");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return TypeError(param, "an object");
    const json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) return TypeError(param + ".role", "a string");
    const std::string& r = role->get_ref<const std::string&>();
    ChatMessage msg;
    if (r == "system" || r == "developer") {
      msg.role = Role::kSystem;
    } else if (r == "user") {
      msg.role = Role::kUser;
    } else if (r == "assistant") {
      msg.role = Role::kAssistant;
      if (MaybeError e = ParseAssistantToolCalls(m, param, &msg)) return e;
      if (MaybeError e = ParseAssistantReasoning(m, param, &msg)) return e;
    } else if (r == "tool") {
      msg.role = Role::kTool;
      if (MaybeError e = ParseToolMessage(m, param, &msg)) return e;
    } else {
      return InvalidRequest("Unsupported role '" + r.substr(0, 32) +
                                "'; expected system, developer, user, assistant or tool.",
                            param + ".role", "invalid_value");
    }
    if (MaybeError e = ParseContent(m, param, msg.role == Role::kAssistant, &msg.content)) return e;
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

}  // namespace

MaybeError CheckModel(std::string_view name, const ParseContext& ctx) {
  return CheckModelName(name, ModelNames{ctx.model_id, ctx.model_aliases, ctx.strict_model_name});
}

MaybeError ResolveRequestAgent(const ParseContext& ctx, std::optional<std::string> body_agent_id,
                               std::optional<std::string> body_session_id, GenerationRequest* out) {
  ExplicitAgentIds ids{ctx.header_agent_id, ctx.header_session_id, std::move(body_agent_id),
                       std::move(body_session_id)};
  AgentIdentity identity;
  if (MaybeError e = ResolveAgentIdentity(ids, ctx.tool_headers, &identity)) return e;
  out->agent_id = std::move(identity.agent_id);
  out->parent_agent_id = std::move(identity.parent_agent_id);
  out->agent_source = std::move(identity.source);
  return std::nullopt;
}

MaybeError ParseChatRequest(std::string_view body, const ParseContext& ctx, GenerationRequest* out) {
  return ParseJsonObjectBody(body, [&](const json& j) -> MaybeError {
    out->kind = RequestKind::kChat;
    if (MaybeError e = ParseMessages(j, &out->messages)) return e;
    if (MaybeError e = ParseToolsAndFormat(j, out)) return e;
    if (MaybeError e = ParseReasoningOptions(j, out)) return e;
    return ParseCommon(j, ctx, out);
  });
}

MaybeError ParseCompletionRequest(std::string_view body, const ParseContext& ctx,
                                  GenerationRequest* out) {
  return ParseJsonObjectBody(body, [&](const json& j) -> MaybeError {
    out->kind = RequestKind::kCompletion;
    const json* p = Field(j, "prompt");
    if (p == nullptr) return InvalidRequest("'prompt' is required.", "prompt", "missing_required_parameter");
    if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) p = &(*p)[0];
    if (!p->is_string()) return TypeError("prompt", "a string (or an array of one string)");
    out->prompt = p->get<std::string>();
    if (out->prompt.empty()) return RangeError("prompt", "a non-empty string");
    if (const json* v = Field(j, "echo"); v != nullptr && !(v->is_boolean() && !v->get<bool>())) {
      return InvalidRequest("'echo' is not supported.", "echo", "unsupported");
    }
    if (const json* v = Field(j, "suffix"); v != nullptr && !(v->is_string() && v->get_ref<const std::string&>().empty())) {
      return InvalidRequest("'suffix' is not supported.", "suffix", "unsupported");
    }
    if (const json* v = Field(j, "best_of")) {
      int64_t n = 0;
      if (MaybeError e = GetInt(*v, "best_of", 1, 1, &n)) return e;
    }
    return ParseCommon(j, ctx, out);
  });
}

}  // namespace agentkv::api
