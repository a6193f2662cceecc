#pragma once
// ChatFormat: a model's chat template and tool-call format, through
// llama.cpp's common chat layer (common/chat.h): the GGUF's Jinja template
// rendered by common's template engine (or kFallbackChatTemplate when the
// GGUF has none), the per-model-family tool-call grammar and parser, and
// JSON Schema -> GBNF for structured output. The rest of agentkv sees only
// the types below; common's types stay in chat_format.cc.
//
// Prefix stability: turns EXTEND an agent's cache only if rendering n+k
// messages starts with the rendering of the first n (plus the generation
// prompt). That holds for templates that render each message from its own
// fields, the tool list in a fixed place, and no clock: `now` is fixed
// (kTemplateNow) so date-printing templates render the same text every day.
// Templates that re-render earlier turns (e.g. drop the reasoning of earlier
// assistant turns, or move the tool list next to the last user message)
// give DIVERGE instead: still correct (character-level matching keeps the
// common prefix and prefills the rest), only less is reused.
// docs/prefix-matching.md ("Chat templates and tools").
//
// Thread safety: ChatFormat is immutable after Create; Render may be called
// from any thread. A ReplyParser belongs to one request (one thread at a time).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model.h"
#include "engine/tokenizer.h"
#include "util/status.h"

namespace agentkv::engine {

// One function call in an assistant message.
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON object text
};

// A message as the template sees it. role: system | user | assistant | tool.
struct ChatMessage {
  std::string role;
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // assistant
  std::string tool_call_id;              // tool
  std::string tool_name;                 // tool, optional
  // assistant: the turn's thinking as the client sent it back (OpenAI
  // `reasoning_content`); templates that keep past thinking render it.
  std::string reasoning_content;
};

// A function the model may call; parameters is JSON Schema text ("" = none).
struct ChatTool {
  std::string name;
  std::string description;
  std::string parameters;
};

enum class ChatToolChoice { kAuto, kNone, kRequired };

// How a reasoning model's thinking is returned (llama-server's
// --reasoning-format): kNone leaves it in the content as the model wrote it;
// kAuto and kDeepseek (the same here) split it out as reasoning_content.
enum class ReasoningFormat { kNone, kAuto, kDeepseek };

struct ChatRequest {
  std::vector<ChatMessage> messages;
  // To force one named function, pass only that tool with kRequired.
  std::vector<ChatTool> tools;
  ChatToolChoice tool_choice = ChatToolChoice::kAuto;
  bool parallel_tool_calls = false;
  // Non-empty: the reply must be JSON matching this schema (JSON text;
  // "{\"type\":\"object\"}" for OpenAI's json_object).
  std::string json_schema;
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
  // The template's enable_thinking (chat_template_kwargs.enable_thinking):
  // false asks templates that support it to close the thinking block in
  // the generation prompt.
  bool enable_thinking = true;
};

// A grammar for the Sampler (llama.cpp GBNF). Empty gbnf: unconstrained.
struct GrammarSpec {
  std::string gbnf;
  // Lazy: unconstrained until the output matches a trigger (a pattern, or
  // one of the tokens); from there on the grammar applies.
  bool lazy = false;
  std::vector<std::string> trigger_patterns;  // regexes over the generated text
  std::vector<int32_t> trigger_tokens;
  // Tokens the grammar must accept before the first sampled one: the
  // template's generation prompt, which the grammar starts with (non-lazy).
  std::vector<int32_t> prefill_tokens;
};

struct ReplyFormat;  // opaque: common's parser for this request's replies

struct ChatPrompt {
  RenderedPrompt rendered;
  GrammarSpec grammar;
  std::vector<std::string> extra_stops;  // the format's own stop strings
  // Set when the reply must be parsed (callable tools, a JSON schema, or a
  // template with thinking while reasoning_format is not kNone); null: the
  // reply is plain text content.
  std::shared_ptr<const ReplyFormat> reply_format;
};

class ChatFormat {
 public:
  // `template_override` (Jinja source; the server's --chat-template-file) if
  // not empty, else the model's template, else kFallbackChatTemplate (also
  // when the chosen one does not parse: logged). Never fails for a loaded
  // model; check an override with CheckTemplate first.
  static std::unique_ptr<ChatFormat> Create(const Model& model, const Tokenizer& tokenizer,
                                            const std::string& template_override = "");
  // InvalidArgument when `source` does not parse as a chat template or
  // cannot render a system + user conversation.
  static Status CheckTemplate(const Model& model, const std::string& source);
  ~ChatFormat();

  // Renders the conversation plus the assistant generation prompt, with the
  // ranges of client text marked plain (see RenderedPrompt), and the grammar
  // and parser the request needs. InvalidArgument: a JSON schema or tool
  // parameters that cannot become a grammar, or a template that fails on
  // these messages (e.g. one that insists on alternating roles).
  Result<ChatPrompt> Render(const ChatRequest& request) const;

  bool uses_fallback_template() const { return fallback_; }
  const std::string& template_source() const { return source_; }

 private:
  ChatFormat() = default;
  std::vector<int32_t> TextTokens(std::string_view text) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
  const Tokenizer* tokenizer_ = nullptr;
  bool fallback_ = false;
  std::string source_;
};

// A piece of the reply, in the order the model wrote it: reasoning text,
// content text, or a tool call's start (id + name, maybe first arguments) or
// more arguments.
struct ReplyDelta {
  std::string reasoning_content;
  std::string content;
  struct ToolCall {
    size_t index = 0;
    std::string id;    // first piece of a call only
    std::string name;  // first piece of a call only
    std::string arguments;
  };
  std::optional<ToolCall> tool_call;
};

// Splits one reply into content and tool calls as it is generated, with the
// format's parser (partial parses while generating, a full one at the end).
// A call is announced only once its name is complete (its arguments have
// begun, or the reply ended); reasoning, content and arguments are only ever
// appended. With reasoning parsed, the thinking of a template that opens it
// in the generation prompt is reasoning until the model closes it (a reply
// that never closes it is all reasoning).
class ReplyParser {
 public:
  // new_call_id: makes the id of each new call ("call_...").
  ReplyParser(std::shared_ptr<const ReplyFormat> format, std::function<std::string()> new_call_id);
  ~ReplyParser();

  // Adds generated text; returns what it completes.
  std::vector<ReplyDelta> Append(std::string_view text);
  // The reply ended: parses it whole. A reply that does not match the format
  // (e.g. cut by max_tokens inside a call) keeps what was already announced.
  std::vector<ReplyDelta> Finish();
  size_t tool_calls() const { return announced_.size(); }

 private:
  std::vector<ReplyDelta> Parse(bool partial);

  std::shared_ptr<const ReplyFormat> format_;
  std::function<std::string()> new_call_id_;
  std::string text_;
  std::string reasoning_;        // reasoning emitted so far
  std::string content_;          // content emitted so far
  std::vector<std::string> announced_;  // arguments emitted per announced call
};

}  // namespace agentkv::engine
