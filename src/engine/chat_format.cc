// ChatFormat over llama.cpp's common chat layer. Everything that touches
// common's types lives in this file.
#include "engine/chat_format.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <regex>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "chat.h"
#include "common.h"
#include "engine/chat_template_fallback.h"
#include "llama.h"
#include "util/json_depth.h"
#include "util/log.h"

namespace agentkv::engine {

// A fixed clock for templates that print today's date: the same
// conversation renders the same text on every day (prefix stability).
static const std::chrono::system_clock::time_point kTemplateNow =
    std::chrono::system_clock::time_point(std::chrono::seconds(1767225600));  // 2026-01-01T00:00:00Z

struct ReplyFormat {
  common_chat_parser_params params;
};

struct ChatFormat::Impl {
  common_chat_templates_ptr templates;
  // Vocabulary pieces -> token, for TextTokens (first token wins).
  std::unordered_map<std::string, int32_t> piece_tokens;
  size_t max_piece = 1;
  // The template renders tool-call arguments as an object (common parses
  // them for it): see TemplateArguments.
  bool object_arguments = false;
};

namespace {

// What templates do to content they trim.
std::string_view Trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Stands in for message i's content (k = 2i) or reasoning_content
// (k = 2i + 1); no template emits these bytes.
std::string Marker(size_t k) { return "\x1d" "akv" + std::to_string(k) + "\x1d"; }

// `marked` with every marker replaced by its message's content or reasoning (trimmed if
// `trim`), recording where the contents landed. False on a malformed marker.
bool Substitute(std::string_view marked, const std::vector<ChatMessage>& messages, bool trim, std::string* out,
                std::vector<TextRange>* ranges) {
  constexpr std::string_view kOpen = "\x1d" "akv";
  size_t at = 0;
  for (size_t m; (m = marked.find(kOpen, at)) != std::string_view::npos;) {
    const size_t close = marked.find('\x1d', m + kOpen.size());
    if (close == std::string_view::npos) return false;
    const std::string_view digits = marked.substr(m + kOpen.size(), close - m - kOpen.size());
    size_t index = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
      index = index * 10 + static_cast<size_t>(c - '0');
    }
    if (digits.empty() || index / 2 >= messages.size()) return false;
    out->append(marked.substr(at, m - at));
    const ChatMessage& msg = messages[index / 2];
    const std::string& text = index % 2 == 0 ? msg.content : msg.reasoning_content;
    const std::string_view content = trim ? Trimmed(text) : std::string_view(text);
    if (!content.empty()) ranges->push_back({out->size(), out->size() + content.size()});
    out->append(content);
    at = close + 1;
  }
  out->append(marked.substr(at));
  return true;
}

// common's grammar for tool_choice "required" lets the model write free text
// before its first call (root ::= prefix space until-N? tool-calls); a model
// as small as the bundled one then rambles until max_tokens and never calls.
// A forced call must be a call: drop the optional free-text element of the
// root rule. Other rules are untouched; a root without that element (other
// formats) is returned as it was.
std::string WithoutLeadingContent(const std::string& gbnf) {
  static const std::regex kRoot(R"((^|\n)root ::= [^\n]*)");
  static const std::regex kFreeText(R"( until-[0-9]+\?)");
  std::smatch m;
  if (!std::regex_search(gbnf, m, kRoot)) return gbnf;
  const std::string root = m.str(0);
  return gbnf.substr(0, m.position(0)) + std::regex_replace(root, kFreeText, "") +
         gbnf.substr(m.position(0) + root.size());
}

// Some of common's formats (one tag per call, e.g. <tool_call>...</tool_call>)
// ignore parallel_tool_calls in the grammar: tool-calls ::= (tool-call space)+.
// Without parallel calls, one call it is.
std::string SingleCall(const std::string& gbnf) {
  static const std::regex kMany(R"((^|\n)tool-calls ::= \(tool-call space\)\+)");
  return std::regex_replace(gbnf, kMany, "$1tool-calls ::= tool-call space");
}

// common's JSON whitespace (space ::= | " " | "\n"{1,2} [ \t]{0,20}, twice
// in a row in places) lets a model that never stops write up to 44
// whitespace characters at every gap of a JSON value: the bundled model
// spent 90 of a call's 101 tokens there. Bounded to one space, or one
// newline and kMaxIndent blanks, once per gap: a model still writes
// compact or shallowly indented JSON, and a weak one at most a few tokens
// per gap.
constexpr int kMaxIndent = 4;
std::string BoundedWhitespace(const std::string& gbnf) {
  static const std::regex kSpace(R"((^|\n)space ::= [^\n]*)");
  static const std::regex kTwice(R"( space space\b)");
  const std::string bounded = "$1space ::= | \" \" | \"\\n\" [ \\t]{0," + std::to_string(kMaxIndent) + "}";
  return std::regex_replace(std::regex_replace(gbnf, kSpace, bounded), kTwice, " space");
}

// With parallel calls, common's grammar for one-tag-per-call formats also
// lets one tag hold several calls, comma-separated (tool-call ::= "<tag>"
// space (call) (space "," space (call))* space "</tag>"), besides several
// tags (tool-calls ::= (tool-call space)+). A weak model then writes ", "
// and another call forever and never reaches the closing tag, the only
// place the reply may end. One call per tag (the formats' own convention):
// parallel calls stay possible as several tags, and the reply can end
// right after each call's closing tag.
std::string OneCallPerTag(const std::string& gbnf) {
  if (gbnf.find("\ntool-calls ::= (tool-call space)+") == std::string::npos) return gbnf;
  static const std::regex kCommaCalls(R"((\ntool-call ::= [^\n]*) \(space "," space \([^()\n]*\)\)\*)");
  return std::regex_replace(gbnf, kCommaCalls, "$1");
}

common_reasoning_format ToCommon(ReasoningFormat f) {
  switch (f) {
    case ReasoningFormat::kNone: return COMMON_REASONING_FORMAT_NONE;
    case ReasoningFormat::kAuto: return COMMON_REASONING_FORMAT_AUTO;
    case ReasoningFormat::kDeepseek: return COMMON_REASONING_FORMAT_DEEPSEEK;
  }
  return COMMON_REASONING_FORMAT_NONE;
}

// A call's arguments as common hands them to the template. For a template
// that renders them as an object (`arguments | tojson`), common parses them
// and throws on text that is not JSON: a call cut by max_tokens that the
// client echoes back. Such text goes in as a JSON string, which the
// template renders quoted: the turn renders (never a 400 for our own
// output) and only the cut call's text differs from what was generated.
std::string TemplateArguments(const std::string& arguments, bool object_arguments) {
  if (!object_arguments || nlohmann::ordered_json::accept(arguments)) return arguments;
  return nlohmann::ordered_json(arguments).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

common_chat_templates_inputs ToInputs(const ChatRequest& r, const std::vector<ChatMessage>& messages,
                                      bool object_arguments) {
  common_chat_templates_inputs in;
  for (const ChatMessage& m : messages) {
    common_chat_msg msg;
    msg.role = m.role;
    msg.content = m.content;
    msg.tool_call_id = m.tool_call_id;
    msg.tool_name = m.tool_name;
    msg.reasoning_content = m.reasoning_content;
    for (const ChatToolCall& c : m.tool_calls) {
      msg.tool_calls.push_back({c.name, TemplateArguments(c.arguments, object_arguments), c.id});
    }
    in.messages.push_back(std::move(msg));
  }
  for (const ChatTool& t : r.tools) {
    in.tools.push_back({t.name, t.description, t.parameters.empty() ? "{\"type\":\"object\",\"properties\":{}}" : t.parameters});
  }
  in.tool_choice = r.tool_choice == ChatToolChoice::kNone       ? COMMON_CHAT_TOOL_CHOICE_NONE
                   : r.tool_choice == ChatToolChoice::kRequired ? COMMON_CHAT_TOOL_CHOICE_REQUIRED
                                                                : COMMON_CHAT_TOOL_CHOICE_AUTO;
  in.parallel_tool_calls = r.parallel_tool_calls;
  in.json_schema = r.json_schema;
  in.add_generation_prompt = true;
  in.use_jinja = true;
  in.reasoning_format = ToCommon(r.reasoning_format);
  in.enable_thinking = r.enable_thinking;  // common passes it to the template as enable_thinking
  in.now = kTemplateNow;
  return in;
}

// common parses the tools' schemas, the JSON schema and the tool calls'
// arguments and hands them to Jinja and json_schema_to_grammar, which
// recurse per level: none may nest deeper than a request may
// (util/json_depth.h; the API layer already refuses them, this is the
// engine's own contract).
Status CheckJsonDepth(const ChatRequest& r) {
  auto too_deep = [](const std::string& what) {
    return Status::InvalidArgument("chat format: " + what + " nests JSON more than " +
                                   std::to_string(kMaxJsonDepth) + " levels deep");
  };
  for (const ChatTool& t : r.tools) {
    if (!JsonDepthWithin(t.parameters)) return too_deep("the parameters of tool '" + t.name.substr(0, 64) + "'");
  }
  if (!JsonDepthWithin(r.json_schema)) return too_deep("the JSON schema");
  for (const ChatMessage& m : r.messages) {
    for (const ChatToolCall& c : m.tool_calls) {
      if (!JsonDepthWithin(c.arguments)) return too_deep("the arguments of a tool call");
    }
  }
  return Status::OK();
}

// common's parser for replies with tools or a JSON schema starts with
// `generation_prompt << body` (common/chat-auto-parser-generator.cpp): the
// `<<` puts a space() between them, which eats the reply's leading
// whitespace, so the content it returns starts later than the model's text.
// The client echoes that content back, the template renders it without the
// whitespace, and the next turn diverges from the cache right there (the
// whole reply re-prefilled). What we return must be what we generated: put
// the eaten whitespace back in front of the content. Only when the reply
// has no reasoning (else it precedes the reasoning) and has content (a
// reply that is whitespace and calls keeps content empty).
void RestoreLeadingBlanks(std::string_view reply, std::string* content, bool no_reasoning) {
  if (!no_reasoning || content->empty() || std::isspace(static_cast<unsigned char>(content->front()))) return;
  size_t n = 0;
  while (n < reply.size() && std::isspace(static_cast<unsigned char>(reply[n]))) ++n;
  if (n > 0 && n < reply.size() && reply[n] == content->front()) content->insert(0, reply.substr(0, n));
}

}  // namespace

Status ChatFormat::CheckTemplate(const Model& model, const std::string& source) {
  try {
    common_chat_templates_ptr t = common_chat_templates_init(model.raw(), source);
    common_chat_templates_inputs in;
    in.messages.resize(2);
    in.messages[0].role = "system";
    in.messages[0].content = "Be brief.";
    in.messages[1].role = "user";
    in.messages[1].content = "Hi";
    in.now = kTemplateNow;
    common_chat_templates_apply(t.get(), in);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("chat template: ") + e.what());
  }
  return Status::OK();
}

std::unique_ptr<ChatFormat> ChatFormat::Create(const Model& model, const Tokenizer& tokenizer,
                                               const std::string& template_override) {
  std::unique_ptr<ChatFormat> f(new ChatFormat());
  f->impl_ = std::make_unique<Impl>();
  f->tokenizer_ = &tokenizer;
  const char* own = llama_model_chat_template(model.raw(), nullptr);
  if (!template_override.empty() || (own != nullptr && *own != '\0')) {
    try {
      f->impl_->templates = common_chat_templates_init(model.raw(), template_override);
      f->source_ = common_chat_templates_source(f->impl_->templates.get());
    } catch (const std::exception& e) {
      AKV_LOG_WARN("chat template: the model's template does not parse (%s); using agentkv's fallback", e.what());
    }
  }
  if (!f->impl_->templates) {
    f->impl_->templates = common_chat_templates_init(model.raw(), kFallbackChatTemplate);
    f->source_ = kFallbackChatTemplate;
    f->fallback_ = true;
  }
  f->impl_->object_arguments = common_chat_templates_get_caps(f->impl_->templates.get())["supports_object_arguments"];
  const int32_t n_vocab = llama_vocab_n_tokens(model.vocab());
  for (int32_t t = 0; t < n_vocab; ++t) {
    const std::string piece = tokenizer.Piece(t);
    if (piece.empty()) continue;
    f->impl_->piece_tokens.emplace(piece, t);
    f->impl_->max_piece = std::max(f->impl_->max_piece, piece.size());
  }
  return f;
}

ChatFormat::~ChatFormat() = default;

// Greedy longest-piece cover of `text`: tokens whose pieces spell it
// exactly (what the grammar checks). llama_tokenize would not do: SentencePiece
// adds a leading space the grammar does not expect.
std::vector<int32_t> ChatFormat::TextTokens(std::string_view text) const {
  std::vector<int32_t> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t len = std::min(impl_->max_piece, text.size() - at);
    for (; len > 0; --len) {
      auto it = impl_->piece_tokens.find(std::string(text.substr(at, len)));
      if (it != impl_->piece_tokens.end()) {
        out.push_back(it->second);
        break;
      }
    }
    if (len == 0) return {};  // a byte no piece spells: no prefill possible
    at += len;
  }
  return out;
}

Result<ChatPrompt> ChatFormat::Render(const ChatRequest& request) const {
  ChatPrompt out;
  common_chat_params params;
  std::string marked;
  if (Status depth = CheckJsonDepth(request); !depth.ok()) return depth;
  try {
    params = common_chat_templates_apply(impl_->templates.get(),
                                         ToInputs(request, request.messages, impl_->object_arguments));
    std::vector<ChatMessage> marked_messages = request.messages;
    for (size_t i = 0; i < marked_messages.size(); ++i) {
      if (!marked_messages[i].content.empty()) marked_messages[i].content = Marker(2 * i);
      if (!marked_messages[i].reasoning_content.empty()) marked_messages[i].reasoning_content = Marker(2 * i + 1);
    }
    ChatRequest plain = request;
    plain.json_schema.clear();  // the prompt does not depend on it; skip its grammar
    marked = common_chat_templates_apply(impl_->templates.get(),
                                         ToInputs(plain, marked_messages, impl_->object_arguments))
                 .prompt;
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("chat template: ") + e.what());
  }
  out.rendered.text = std::move(params.prompt);
  bool located = false;
  for (bool trim : {false, true}) {
    std::string rebuilt;
    std::vector<TextRange> ranges;
    if (Substitute(marked, request.messages, trim, &rebuilt, &ranges) && rebuilt == out.rendered.text) {
      out.rendered.plain = std::move(ranges);
      located = true;
      break;
    }
  }
  // Content transformed beyond recognition: parse no special at all rather
  // than risk parsing the client's.
  if (!located && !out.rendered.text.empty()) out.rendered.plain = {{0, out.rendered.text.size()}};

  const bool callable = !request.tools.empty() && request.tool_choice != ChatToolChoice::kNone;
  // Thinking is split out only for templates that declare it (as
  // llama-server decides enable_thinking); others' replies stay plain text.
  const bool reasoning = request.reasoning_format != ReasoningFormat::kNone && params.supports_thinking;
  if (callable || !request.json_schema.empty() || reasoning) {
    auto format = std::make_shared<ReplyFormat>();
    format->params = common_chat_parser_params(params);
    format->params.reasoning_format = ToCommon(request.reasoning_format);
    format->params.parse_tool_calls = callable;
    if (!params.parser.empty()) format->params.parser.load(params.parser);
    out.reply_format = std::move(format);
    out.extra_stops = params.additional_stops;
    GrammarSpec& g = out.grammar;
    g.gbnf = request.tool_choice == ChatToolChoice::kRequired && callable ? WithoutLeadingContent(params.grammar)
                                                                          : params.grammar;
    g.gbnf = callable && !request.parallel_tool_calls ? SingleCall(g.gbnf) : OneCallPerTag(g.gbnf);
    g.gbnf = BoundedWhitespace(g.gbnf);
    g.lazy = params.grammar_lazy;
    for (const common_grammar_trigger& t : params.grammar_triggers) {
      switch (t.type) {
        case COMMON_GRAMMAR_TRIGGER_TYPE_WORD: g.trigger_patterns.push_back(regex_escape(t.value)); break;
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN: g.trigger_patterns.push_back(t.value); break;
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
          std::string p = t.value;
          if (p.empty() || p.front() != '^') p = "^" + p;
          if (p.back() != '$') p += "$";
          g.trigger_patterns.push_back(p);
          break;
        }
        case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN: g.trigger_tokens.push_back(t.token); break;
      }
    }
    if (!g.gbnf.empty() && !g.lazy && !params.generation_prompt.empty()) {
      g.prefill_tokens = TextTokens(params.generation_prompt);
      if (g.prefill_tokens.empty()) return Status::Internal("chat format: cannot spell the generation prompt in tokens");
    }
  }
  return out;
}

ReplyParser::ReplyParser(std::shared_ptr<const ReplyFormat> format, std::function<std::string()> new_call_id)
    : format_(std::move(format)), new_call_id_(std::move(new_call_id)) {}

ReplyParser::~ReplyParser() = default;

std::vector<ReplyDelta> ReplyParser::Append(std::string_view text) {
  text_.append(text);
  return Parse(/*partial=*/true);
}

std::vector<ReplyDelta> ReplyParser::Finish() { return Parse(/*partial=*/false); }

std::vector<ReplyDelta> ReplyParser::Parse(bool partial) {
  std::vector<ReplyDelta> out;
  common_chat_msg msg;
  // The model's text nests deeper than any request may: common's parser would
  // turn it into JSON that recursive code then walks. Treated as unparsable.
  if (!JsonDepthWithin(text_)) {
    if (!partial) AKV_LOG_WARN("reply parser: the reply nests more than %zu levels; its unparsed rest is dropped", kMaxJsonDepth);
    return out;
  }
  try {
    msg = common_chat_parse(text_, partial, format_->params);
  } catch (const std::exception& e) {
    if (!partial) {
      AKV_LOG_WARN("reply parser: %s; the reply's unparsed rest is dropped", e.what());
    }
    return out;
  }
  RestoreLeadingBlanks(text_, &msg.content, msg.reasoning_content.empty());
  if (msg.reasoning_content.size() > reasoning_.size() &&
      msg.reasoning_content.compare(0, reasoning_.size(), reasoning_) == 0) {
    ReplyDelta d;
    d.reasoning_content = msg.reasoning_content.substr(reasoning_.size());
    reasoning_ = msg.reasoning_content;
    out.push_back(std::move(d));
  }
  if (msg.content.size() > content_.size() && msg.content.compare(0, content_.size(), content_) == 0) {
    ReplyDelta d;
    d.content = msg.content.substr(content_.size());
    content_ = msg.content;
    out.push_back(std::move(d));
  }
  for (size_t i = 0; i < msg.tool_calls.size(); ++i) {
    const common_chat_tool_call& call = msg.tool_calls[i];
    if (i < announced_.size()) {
      std::string& sent = announced_[i];
      if (call.arguments.size() > sent.size() && call.arguments.compare(0, sent.size(), sent) == 0) {
        ReplyDelta d;
        d.tool_call = ReplyDelta::ToolCall{i, "", "", call.arguments.substr(sent.size())};
        sent = call.arguments;
        out.push_back(std::move(d));
      }
      continue;
    }
    // A new call: announce it once its name is settled.
    const bool last = i + 1 == msg.tool_calls.size();
    if (call.name.empty() || (partial && last && call.arguments.empty())) break;
    ReplyDelta d;
    d.tool_call = ReplyDelta::ToolCall{i, new_call_id_(), call.name, call.arguments};
    announced_.push_back(call.arguments);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace agentkv::engine
