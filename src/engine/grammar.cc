#include "engine/grammar.h"

#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "engine/chat_format.h"
#include "engine/model.h"
#include "llama-grammar.h"  // llama.cpp's internal grammar API (src/): stacks, clone, a parse without the print
#include "llama.h"
#include "util/log.h"

namespace agentkv::engine {
namespace {

constexpr size_t kErrorExcerptBytes = 200;

Status TooManyStacks(size_t n) {
  return Status::InvalidArgument("grammar: " + std::to_string(n) + " alternatives at once, more than the " +
                                 std::to_string(kMaxGrammarStacks) +
                                 " allowed (a schema's enum or pattern alternation is too large)");
}

// llama_grammar_parser::parse without its fprintf of the whole source on a
// failure: the same rule loop and the same undefined-rule check.
Status ParseOnly(const llama_vocab* vocab, const std::string& src) {
  llama_grammar_parser parser(vocab);
  try {
    const char* pos = src.c_str();
    auto skip_space = [&pos] {  // parse_space(pos, /*newline_ok=*/true)
      while (*pos == ' ' || *pos == '\t' || *pos == '\r' || *pos == '\n' || *pos == '#') {
        if (*pos == '#') {
          while (*pos != '\0' && *pos != '\r' && *pos != '\n') ++pos;
        } else {
          ++pos;
        }
      }
    };
    skip_space();
    while (*pos != '\0') pos = parser.parse_rule(pos);
    for (const llama_grammar_rule& rule : parser.rules) {
      if (rule.empty()) throw std::runtime_error("undefined rule");
      for (const llama_grammar_element& e : rule) {
        if (e.type == LLAMA_GRETYPE_RULE_REF && (e.value >= parser.rules.size() || parser.rules[e.value].empty())) {
          throw std::runtime_error("undefined rule reference");
        }
      }
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument("grammar: " + EscapeForLog(e.what(), kErrorExcerptBytes));
  }
  if (parser.rules.empty()) return Status::InvalidArgument("grammar: no rules");
  // A rule's alternatives all become live stacks where the rule starts: an
  // enum or a pattern's (a|b|...) is one rule; refused here, before any
  // sampling, rather than when the sampler reaches it.
  for (const llama_grammar_rule& rule : parser.rules) {
    size_t alternatives = 1;
    for (const llama_grammar_element& e : rule) alternatives += e.type == LLAMA_GRETYPE_ALT;
    if (alternatives > kMaxGrammarStacks) return TooManyStacks(alternatives);
  }
  if (parser.symbol_ids.find("root") == parser.symbol_ids.end()) {
    return Status::InvalidArgument("grammar: no 'root' rule");
  }
  return Status::OK();
}


}  // namespace

Status CheckSchemaBytes(const ChatRequest& request) {
  size_t bytes = request.json_schema.size();
  for (const ChatTool& t : request.tools) bytes += t.parameters.size();
  if (bytes <= kMaxSchemaBytes) return Status::OK();
  return Status::InvalidArgument("the JSON schemas of 'response_format' and 'tools' are " + std::to_string(bytes) +
                                 " bytes, more than the " + std::to_string(kMaxSchemaBytes) + " allowed");
}

Result<std::shared_ptr<const Grammar>> Grammar::Compile(const Model& model, const GrammarSpec& spec) {
  if (spec.gbnf.size() > kMaxGrammarBytes) {
    return Status::InvalidArgument("grammar: " + std::to_string(spec.gbnf.size()) + " bytes, more than the " +
                                   std::to_string(kMaxGrammarBytes) + " allowed (the schema is too large)");
  }
  AGENTKV_RETURN_IF_ERROR(ParseOnly(model.vocab(), spec.gbnf));
  std::vector<const char*> patterns;
  for (const std::string& p : spec.trigger_patterns) patterns.push_back(p.c_str());
  std::vector<llama_token> tokens(spec.trigger_tokens.begin(), spec.trigger_tokens.end());
  std::shared_ptr<Grammar> g(new Grammar());
  try {  // std::regex of a trigger pattern may throw
    g->grammar_ = llama_grammar_init_impl(model.vocab(), spec.gbnf.c_str(), "root", spec.lazy, patterns.data(),
                                          patterns.size(), tokens.data(), tokens.size());
  } catch (const std::exception& e) {
    return Status::InvalidArgument("grammar: " + EscapeForLog(e.what(), kErrorExcerptBytes));
  }
  // Parsed above: only a left recursion (logged by llama.cpp) fails here.
  if (g->grammar_ == nullptr) return Status::InvalidArgument("grammar: unsupported (left recursion)");
  if (g->n_stacks() > kMaxGrammarStacks) return TooManyStacks(g->n_stacks());
  if (!spec.prefill_tokens.empty()) {
    GrammarState state(*g);
    for (int32_t t : spec.prefill_tokens) {
      if (Status s = state.Accept(t); !s.ok()) {
        return Status::InvalidArgument("the grammar refuses the generation prompt: " + s.message());
      }
    }
    std::swap(g->grammar_, state.grammar_);
  }
  return std::shared_ptr<const Grammar>(std::move(g));
}

Grammar::~Grammar() {
  if (grammar_ != nullptr) llama_grammar_free_impl(grammar_);
}

size_t Grammar::n_stacks() const { return grammar_->stacks.size(); }

GrammarState::GrammarState(const Grammar& grammar) : grammar_(llama_grammar_clone_impl(*grammar.grammar_)) {}

GrammarState::~GrammarState() {
  if (grammar_ != nullptr) llama_grammar_free_impl(grammar_);
}

size_t GrammarState::n_stacks() const { return grammar_->stacks.size(); }

bool GrammarState::Complete() const {
  if (grammar_->awaiting_trigger) return false;
  for (const llama_grammar_stack& stack : grammar_->stacks) {
    if (stack.empty()) return true;
  }
  return false;
}

bool GrammarState::IsBlank(int32_t token) const {
  char buf[64];
  const int32_t n = llama_token_to_piece(grammar_->vocab, token, buf, sizeof(buf), 0, /*special=*/true);
  if (n <= 0) return false;  // no text, or a piece longer than any whitespace run we care about
  for (int32_t i = 0; i < n; ++i) {
    if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\r' && buf[i] != '\n') return false;
  }
  return true;
}

int32_t GrammarState::EndToken() const {
  const llama_token eos = llama_vocab_eos(grammar_->vocab);
  return eos != LLAMA_TOKEN_NULL ? eos : llama_vocab_eot(grammar_->vocab);
}

bool GrammarState::Allows(int32_t token) const {
  bool allowed = false;
  Check(std::span<const int32_t>(&token, 1), std::span<bool>(&allowed, 1));
  return allowed;
}

void GrammarState::Check(std::span<const int32_t> tokens, std::span<bool> allowed) const {
  // No stack left (only after a failed Accept): nothing is allowed, and
  // llama.cpp would assert.
  if (grammar_->stacks.empty() && !grammar_->awaiting_trigger) {
    for (bool& a : allowed) a = false;
    return;
  }
  std::vector<llama_token_data> cand(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) cand[i] = {tokens[i], 0.0f, 0.0f};
  llama_token_data_array arr{cand.data(), cand.size(), -1, false};
  llama_grammar_apply_impl(*grammar_, &arr);  // forbidden -> -inf, the others keep 0
  for (size_t i = 0; i < tokens.size(); ++i) allowed[i] = cand[i].logit != -INFINITY;
}

Status GrammarState::Accept(int32_t token) {
  // Checked first: llama.cpp aborts the process on an end-of-generation
  // token its grammar does not allow.
  if (!Allows(token)) return Status::InvalidArgument("grammar: token " + std::to_string(token) + " is not allowed");
  try {
    llama_grammar_accept_impl(*grammar_, token);
  } catch (const std::exception& e) {
    return Status::InvalidArgument("grammar: " + EscapeForLog(e.what(), kErrorExcerptBytes));
  }
  if (grammar_->stacks.size() > kMaxGrammarStacks) return TooManyStacks(grammar_->stacks.size());
  return Status::OK();
}

}  // namespace agentkv::engine
