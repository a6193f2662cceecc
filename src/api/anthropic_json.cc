// POST /v1/messages request parsing. Every check names the offending field
// (Anthropic's messages say "messages.1.content.0.type: ..."), all before
// any model work.

#include "api/anthropic_json.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "api/anthropic_tools.h"
#include "api/bounded_json.h"
#include "api/json_fields.h"

namespace agentkv::api {
namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

constexpr size_t kMaxStopSequences = 16;

ApiError Invalid(const std::string& param, const std::string& what, const char* code) {
  return AnthropicFieldError(param, what, code);
}
ApiError Unsupported(const std::string& param, const std::string& what) {
  return AnthropicFieldError(param, what, "unsupported");
}

MaybeError GetNumber(const json& body, const char* name, double lo, double hi, bool lo_open, float* out) {
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return AnthropicTypeError(name, "a number");
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
  if (!v.is_number_integer()) return AnthropicTypeError(name, "an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return Invalid(name, "must be at most " + std::to_string(hi), "invalid_value");
  }
  *out = v.get<int64_t>();
  if (*out < lo || *out > hi) {
    return Invalid(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", "invalid_value");
  }
  return std::nullopt;
}

// Whether `line` is Claude Code's attribution line, exactly
// "x-anthropic-billing-header:" then one or more " key=value;" (keys of
// [A-Za-z0-9_], values without ';'), e.g.
// "x-anthropic-billing-header: cc_version=2.1.332.abc; cc_entrypoint=cli; cch=abcd1;".
bool IsBillingHeaderLine(std::string_view line) {
  constexpr std::string_view kPrefix = "x-anthropic-billing-header:";
  if (!line.starts_with(kPrefix)) return false;
  line.remove_prefix(kPrefix.size());
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t pairs = 0;
  while (!line.empty()) {
    if (line.front() != ' ') return false;
    line.remove_prefix(1);
    const size_t eq = line.find('=');
    const size_t semi = line.find(';');
    if (eq == 0 || eq == std::string_view::npos || semi == std::string_view::npos || semi < eq) return false;
    for (char c : line.substr(0, eq)) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    }
    line.remove_prefix(semi + 1);
    ++pairs;
  }
  return pairs > 0;
}

// system: a string or an array of text blocks (joined with "\n"). Claude
// Code's attribution line, when it is the first line of the first block, is
// dropped with its line break (llama.cpp's rule, PR #20623, narrowed to that
// one line shape): its `cch` hash differs per session and at times per
// request, and kept it would end every shared prefix at character ~47.
// docs/api.md, "Claude Code's attribution line".
MaybeError ParseSystem(const json& body, std::string* out) {
  const json* s = Field(body, "system");
  if (s == nullptr) return std::nullopt;
  if (MaybeError e = StringOrTextBlocks(*s, "system", "system", out)) return e;
  const size_t eol = out->find('\n');
  if (IsBillingHeaderLine(std::string_view(*out).substr(0, eol))) {
    out->erase(0, eol == std::string::npos ? std::string::npos : eol + 1);
  }
  return std::nullopt;
}

// One message's content: a string, or blocks, appended to *out as one or
// more ChatMessages. Text blocks are joined with "\n" (as OpenAI text parts
// are, so the same conversation renders the same prompt through either API
// and shares its cache). An assistant's thinking blocks are the model's
// private reasoning and are dropped; its tool_use blocks become the
// message's tool_calls. A user message's tool_result blocks become kTool
// messages (one per block, in order, as OpenAI's role "tool" messages), and
// must come first (Anthropic's rule); text after them becomes a user message.
// `tool_names` maps the tool_use ids seen so far to their names.
MaybeError ParseContent(const json& msg, const std::string& param, Role role,
                        const std::map<std::string, std::string>& tool_names, std::vector<ChatMessage>* out) {
  const json* c = Field(msg, "content");
  if (c == nullptr) return AnthropicMissingError(param + ".content");
  ChatMessage main;
  main.role = role;
  if (c->is_string()) {
    main.content = c->get<std::string>();
    out->push_back(std::move(main));
    return std::nullopt;
  }
  if (!c->is_array()) return AnthropicTypeError(param + ".content", "a string or an array of content blocks");
  bool first_text = true;
  bool had_results = false;
  for (size_t i = 0; i < c->size(); ++i) {
    const json& b = (*c)[i];
    const std::string bp = param + ".content." + std::to_string(i);
    std::string t;
    if (MaybeError e = BlockType(b, bp, &t)) return e;
    if (t == "text") {
      std::string text;
      if (MaybeError e = TextOfBlock(b, bp, &text)) return e;
      if (!first_text) main.content.push_back('\n');
      main.content.append(text);
      first_text = false;
    } else if (t == "thinking" && role == Role::kAssistant) {
      // The turn's thinking goes back to the template (which may drop it);
      // the signature is not checked (agentkv's own are empty).
      const json* th = Field(b, "thinking");
      if (th == nullptr || !th->is_string()) return AnthropicTypeError(bp + ".thinking", "a string");
      main.reasoning_content += th->get<std::string>();
    } else if (t == "redacted_thinking" && role == Role::kAssistant) {
      continue;
    } else if (t == "tool_use" && role == Role::kAssistant) {
      ToolCall call;
      if (MaybeError e = ParseToolUseBlock(b, bp, &call)) return e;
      main.tool_calls.push_back(std::move(call));
    } else if (t == "tool_result" && role == Role::kUser) {
      if (!first_text) {
        return Invalid(bp, "tool_result blocks must come before any text in a user message", "invalid_value");
      }
      ChatMessage result;
      if (MaybeError e = ParseToolResultBlock(b, bp, &result)) return e;
      auto name = tool_names.find(result.tool_call_id);
      if (name == tool_names.end()) {
        return Invalid(bp + ".tool_use_id",
                       "'" + result.tool_call_id.substr(0, 64) + "' answers no tool_use block of an earlier "
                       "assistant message",
                       "invalid_value");
      }
      result.tool_name = name->second;
      out->push_back(std::move(result));
      had_results = true;
    } else if (t == "tool_use" || t == "tool_result") {
      return Unsupported(bp + ".type", "'" + t + "' blocks belong in " +
                                           (t == "tool_use" ? "assistant" : "user") + " messages");
    } else {
      return Unsupported(bp + ".type", "'" + t.substr(0, 40) + "' blocks are not supported; only text, tool_use "
                                       "and tool_result (see docs/api.md)");
    }
  }
  // A user message of tool results only adds no empty user turn after them.
  if (!(had_results && first_text)) out->push_back(std::move(main));
  return std::nullopt;
}

MaybeError ParseMessages(const json& body, std::vector<ChatMessage>* out) {
  const json* msgs = Field(body, "messages");
  if (msgs == nullptr) return AnthropicMissingError("messages");
  if (!msgs->is_array()) return AnthropicTypeError("messages", "an array");
  if (msgs->empty()) return Invalid("messages", "at least one message is required", "invalid_value");
  std::map<std::string, std::string> tool_names;  // tool_use id -> name, for tool_result blocks
  Role last_role = Role::kUser;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string param = "messages." + std::to_string(i);
    if (!m.is_object()) return AnthropicTypeError(param, "an object");
    const json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) return AnthropicTypeError(param + ".role", "a string");
    const std::string& r = role->get_ref<const std::string&>();
    if (r == "system") {
      // Claude Code sends system messages mid-conversation (reminders); they
      // render in place, so the prefix before them stays cacheable (moving
      // them to the top would change it every turn).
      const json* c = Field(m, "content");
      if (c == nullptr) return AnthropicMissingError(param + ".content");
      ChatMessage sys;
      sys.role = Role::kSystem;
      if (MaybeError e = StringOrTextBlocks(*c, param + ".content", "system messages", &sys.content)) return e;
      out->push_back(std::move(sys));
      continue;
    }
    Role msg_role;
    if (r == "user") {
      msg_role = Role::kUser;
    } else if (r == "assistant") {
      msg_role = Role::kAssistant;
    } else {
      return Invalid(param + ".role",
                     "'" + r.substr(0, 32) + "' is not a valid role (user, assistant or system)",
                     "invalid_value");
    }
    if (MaybeError e = ParseContent(m, param, msg_role, tool_names, out)) return e;
    last_role = msg_role;
    if (msg_role == Role::kAssistant) {
      for (const ToolCall& call : out->back().tool_calls) tool_names[call.id] = call.name;
    }
  }
  if (last_role == Role::kAssistant) {
    return Unsupported("messages." + std::to_string(msgs->size() - 1),
                       "a final assistant message (prefill) is not supported; end with a user message");
  }
  return std::nullopt;
}

MaybeError ParseStopSequences(const json& body, std::vector<std::string>* out) {
  const json* v = Field(body, "stop_sequences");
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) return AnthropicTypeError("stop_sequences", "an array of strings");
  if (v->size() > kMaxStopSequences) return Invalid("stop_sequences", "at most 16 strings", "invalid_value");
  for (const json& s : *v) {
    if (!s.is_string()) return AnthropicTypeError("stop_sequences", "an array of strings");
    if (s.get_ref<const std::string&>().empty()) {
      return Invalid("stop_sequences", "each stop sequence must be non-empty", "invalid_value");
    }
    out->push_back(s.get<std::string>());
  }
  return std::nullopt;
}

// mcp_servers (Anthropic's MCP connector) is refused; an empty list is harmless.
MaybeError CheckMcpServers(const json& body) {
  if (const json* mcp = Field(body, "mcp_servers"); mcp != nullptr && !(mcp->is_array() && mcp->empty())) {
    return Unsupported("mcp_servers", "MCP servers are not supported");
  }
  return std::nullopt;
}

MaybeError ParseRequest(const json& body, const ParseContext& ctx, GenerationRequest* out,
                        std::string* model_echo) {
  const json* model = Field(body, "model");
  if (model == nullptr) return AnthropicMissingError("model");
  if (!model->is_string()) return AnthropicTypeError("model", "a string");
  *model_echo = model->get<std::string>();
  if (MaybeError e = CheckModel(*model_echo, ctx)) return e;

  const json* mt = Field(body, "max_tokens");
  if (mt == nullptr) return AnthropicMissingError("max_tokens");
  int64_t max_tokens = 0;
  if (MaybeError e = GetInt(*mt, "max_tokens", 1, kMaxTokensLimit, &max_tokens)) return e;
  out->sampling.max_tokens = static_cast<int32_t>(max_tokens);

  out->kind = RequestKind::kChat;
  std::string system;
  if (MaybeError e = ParseSystem(body, &system)) return e;
  if (!system.empty()) {
    ChatMessage sys;
    sys.role = Role::kSystem;
    sys.content = std::move(system);
    out->messages.push_back(std::move(sys));
  }
  if (MaybeError e = ParseMessages(body, &out->messages)) return e;
  if (MaybeError e = ParseAnthropicTools(body, out)) return e;
  if (MaybeError e = CheckMcpServers(body)) return e;

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
    if (!v->is_boolean()) return AnthropicTypeError("stream", "a boolean");
    out->stream = v->get<bool>();
  }
  if (const json* v = Field(body, "metadata")) {
    if (!v->is_object()) return AnthropicTypeError("metadata", "an object");
    if (const json* u = Field(*v, "user_id"); u != nullptr && !u->is_string()) {
      return AnthropicTypeError("metadata.user_id", "a string");
    }
  }
  if (const json* v = Field(body, "thinking")) {
    if (!v->is_object()) return AnthropicTypeError("thinking", "an object");
    const json* type = Field(*v, "type");
    if (type == nullptr || !type->is_string()) return AnthropicTypeError("thinking.type", "a string");
    const std::string t = type->get<std::string>();
    if (t != "enabled" && t != "disabled" && t != "adaptive") {
      return Invalid("thinking.type", "Input should be 'enabled', 'disabled' or 'adaptive'", "invalid_value");
    }
    // budget_tokens is accepted and not enforced (max_tokens bounds the reply).
    out->enable_thinking = t != "disabled";
  } else {
    out->enable_thinking = false;  // Anthropic's default: no thinking
  }

  std::optional<std::string> body_ids[2];
  const char* names[2] = {"agent_id", "session_id"};
  for (int i = 0; i < 2; ++i) {
    const json* v = Field(body, names[i]);
    if (v == nullptr) continue;
    if (!v->is_string()) return AnthropicTypeError(names[i], "a string");
    body_ids[i] = v->get<std::string>();
  }
  return ResolveRequestAgent(ctx, std::move(body_ids[0]), std::move(body_ids[1]), out);
}

}  // namespace

MaybeError ParseMessagesRequest(std::string_view body, const ParseContext& ctx, GenerationRequest* out,
                                std::string* model_echo) {
  return ParseJsonObjectBody(body, [&](const json& j) { return ParseRequest(j, ctx, out, model_echo); });
}

}  // namespace agentkv::api
