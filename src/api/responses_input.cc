// The input of a POST /v1/responses: a string or items, into the
// ChatMessages the chat route builds for the same conversation. Every check
// names the offending field ("input[2].content[0].type").

#include "api/responses_input.h"

#include <map>

#include "api/bounded_json.h"
#include "api/json_fields.h"
#include "api/responses_json.h"

namespace agentkv::api {
namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

// Text of a content array: input_text / output_text parts (and an
// assistant's refusal), joined with "\n" as the chat route joins its parts.
MaybeError TextParts(const json& parts, const std::string& param, std::string* out) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const json& p = parts[i];
    const std::string pp = param + "[" + std::to_string(i) + "]";
    if (!p.is_object()) return TypeError(pp, "an object");
    const json* type = Field(p, "type");
    if (type == nullptr || !type->is_string()) return TypeError(pp + ".type", "a string");
    const std::string& t = type->get_ref<const std::string&>();
    const char* field = t == "refusal" ? "refusal" : "text";
    if (t != "input_text" && t != "output_text" && t != "refusal") {
      return UnsupportedError("Content of type '" + t.substr(0, 40) +
                                  "' is not supported; only input_text and output_text (see docs/api.md).",
                              pp + ".type");
    }
    const json* text = Field(p, field);
    if (text == nullptr || !text->is_string()) return TypeError(pp + "." + field, "a string");
    if (i > 0) out->push_back('\n');
    out->append(text->get_ref<const std::string&>());
  }
  return std::nullopt;
}

MaybeError StringOrParts(const json& v, const std::string& param, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return TypeError(param, "a string or an array of input_text parts");
  return TextParts(v, param, out);
}

// Turns input items into messages. A function_call joins the assistant
// message just before it (its text, or the previous calls of the same
// turn), else starts one with empty content; a reasoning item's text goes
// to the assistant message that follows it (as Anthropic thinking does).
class InputBuilder {
 public:
  explicit InputBuilder(std::vector<ChatMessage>* out) : out_(out) {}

  MaybeError Item(const json& item, const std::string& param) {
    if (!item.is_object()) return TypeError(param, "an object");
    std::string type = "message";
    if (const json* t = Field(item, "type")) {
      if (!t->is_string()) return TypeError(param + ".type", "a string");
      type = t->get<std::string>();
    }
    if (type == "message") return Message(item, param);
    if (type == "function_call") return FunctionCall(item, param);
    if (type == "function_call_output") return FunctionCallOutput(item, param);
    if (type == "reasoning") return Reasoning(item, param);
    if (type == "item_reference") {
      return UnsupportedError("agentkv stores no responses: 'item_reference' cannot be resolved; send the items.",
                              param + ".type");
    }
    return UnsupportedError("Input items of type '" + type.substr(0, 40) +
                                "' are not supported; only message, function_call, function_call_output and reasoning.",
                            param + ".type");
  }

 private:
  MaybeError Message(const json& item, const std::string& param) {
    const json* role = Field(item, "role");
    if (role == nullptr) return MissingError(param + ".role");
    if (!role->is_string()) return TypeError(param + ".role", "a string");
    const std::string& r = role->get_ref<const std::string&>();
    ChatMessage msg;
    if (r == "user") {
      msg.role = Role::kUser;
    } else if (r == "assistant") {
      msg.role = Role::kAssistant;
    } else if (r == "system" || r == "developer") {
      msg.role = Role::kSystem;
    } else {
      return InvalidValueError(
          "Unsupported role '" + r.substr(0, 32) + "'; expected user, assistant, system or developer.",
          param + ".role");
    }
    const json* content = Field(item, "content");
    if (content == nullptr) return MissingError(param + ".content");
    if (MaybeError e = StringOrParts(*content, param + ".content", &msg.content)) return e;
    if (msg.role == Role::kAssistant) {
      msg.reasoning_content = std::move(pending_reasoning_);
      pending_reasoning_.clear();
    }
    out_->push_back(std::move(msg));
    return std::nullopt;
  }

  MaybeError FunctionCall(const json& item, const std::string& param) {
    ToolCall call;
    if (MaybeError e = RequireStringField(item, "call_id", param, &call.id)) return e;
    if (MaybeError e = RequireStringField(item, "name", param, &call.name)) return e;
    if (MaybeError e = RequireStringField(item, "arguments", param, &call.arguments)) return e;
    if (const json* ns = Field(item, "namespace")) {  // rendered as the model saw it (responses_json.h)
      if (!ns->is_string()) return TypeError(param + ".namespace", "a string");
      call.name = NamespacedToolName(ns->get<std::string>(), call.name);
    }
    if (MaybeError e = CheckEchoedArguments(call.arguments, param + ".arguments")) return e;
    if (out_->empty() || out_->back().role != Role::kAssistant) {
      ChatMessage msg;
      msg.role = Role::kAssistant;
      msg.reasoning_content = std::move(pending_reasoning_);
      out_->push_back(std::move(msg));
    } else if (out_->back().reasoning_content.empty()) {
      out_->back().reasoning_content = std::move(pending_reasoning_);
    }
    pending_reasoning_.clear();
    names_[call.id] = call.name;
    out_->back().tool_calls.push_back(std::move(call));
    return std::nullopt;
  }

  MaybeError FunctionCallOutput(const json& item, const std::string& param) {
    ChatMessage msg;
    msg.role = Role::kTool;
    if (MaybeError e = RequireStringField(item, "call_id", param, &msg.tool_call_id)) return e;
    auto name = names_.find(msg.tool_call_id);
    if (name == names_.end()) {
      return InvalidValueError(
          "No function_call item with call_id '" + msg.tool_call_id.substr(0, 64) + "' comes before this output.",
          param + ".call_id");
    }
    msg.tool_name = name->second;
    const json* output = Field(item, "output");
    if (output == nullptr) return MissingError(param + ".output");
    if (MaybeError e = StringOrParts(*output, param + ".output", &msg.content)) return e;
    out_->push_back(std::move(msg));
    return std::nullopt;
  }

  // Codex echoes its reasoning items back. Their readable text (content, else
  // summary) returns to the template as the next assistant turn's
  // reasoning_content; encrypted_content is OpenAI's and is dropped.
  MaybeError Reasoning(const json& item, const std::string& param) {
    for (const char* key : {"content", "summary"}) {
      const json* parts = Field(item, key);
      if (parts == nullptr) continue;
      if (!parts->is_array()) return TypeError(param + "." + key, "an array");
      std::string text;
      for (size_t i = 0; i < parts->size(); ++i) {
        const json& p = (*parts)[i];
        const json* t = p.is_object() ? Field(p, "text") : nullptr;
        if (t == nullptr || !t->is_string()) {
          return TypeError(param + "." + key + "[" + std::to_string(i) + "].text", "a string");
        }
        if (i > 0) text.push_back('\n');
        text += t->get_ref<const std::string&>();
      }
      if (!text.empty() && pending_reasoning_.empty()) pending_reasoning_ = std::move(text);
    }
    return std::nullopt;
  }

  std::vector<ChatMessage>* out_;
  std::map<std::string, std::string> names_;  // call_id -> function name
  std::string pending_reasoning_;
};

}  // namespace

std::optional<ApiError> ParseResponsesInput(const json& body, std::vector<ChatMessage>* out) {
  const json* input = Field(body, "input");
  if (input == nullptr) return MissingError("input");
  if (input->is_string()) {
    ChatMessage msg;
    msg.role = Role::kUser;
    msg.content = input->get<std::string>();
    out->push_back(std::move(msg));
    return std::nullopt;
  }
  if (!input->is_array()) return TypeError("input", "a string or an array of input items");
  if (input->empty()) return InvalidValueError("'input' must not be empty.", "input");
  InputBuilder builder(out);
  for (size_t i = 0; i < input->size(); ++i) {
    if (MaybeError e = builder.Item((*input)[i], "input[" + std::to_string(i) + "]")) return e;
  }
  return std::nullopt;
}

}  // namespace agentkv::api
