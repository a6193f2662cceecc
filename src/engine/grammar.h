#pragma once
// Grammar: a GBNF grammar (llama.cpp's), parsed and checked once, on the
// thread that receives the request, and one request's position in it.
//
// Bounds (docs/api.md, "Grammar cost"): the cost of applying a grammar to a
// candidate token grows with the number of parse stacks it holds (one per
// live alternative: an enum of N strings holds N stacks at its start). A
// grammar over kMaxGrammarBytes, with a rule of more than kMaxGrammarStacks
// alternatives, or holding more stacks than that at any point, is refused:
// at compile time (the request gets a 400 before it is queued) or, for stacks
// that only add up later (several rules' alternatives live at once), when
// the sampler reaches them (the turn ends with an error).
//
// llama.cpp's own grammar parser prints a grammar it cannot parse, raw and
// whole, to stderr; Compile parses it here first with llama.cpp's parser but
// without that print, and reports a short escaped excerpt instead.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "util/status.h"

struct llama_grammar;
struct llama_vocab;

namespace agentkv::engine {

class Model;
struct GrammarSpec;

// 128 KiB of GBNF: the JSON-schema grammars of real tools are a few KiB
// (each of OpenAI's 128 tools' grammar is ~1-4 KiB); what is larger is
// almost always a huge enum or alternation, which kMaxGrammarStacks refuses
// anyway. A refused 5,000-item enum (~60 KiB of GBNF) is answered in
// 30-80 ms end to end (bench/hostile_clients.py --grammar-only).
inline constexpr size_t kMaxGrammarBytes = 128 << 10;
// 512 stacks: an enum of 512 strings (OpenAI allows 500 enum values per
// property). Judging the whole 32K vocabulary at this bound takes ~80 ms on
// one core of the 2-core VM (2.6 ms per chunk of 1,024 candidates; 7 ms at
// 1 stack), measured by grammar_test's DISABLED_MeasureAFullPassAtTheBound.
inline constexpr size_t kMaxGrammarStacks = 512;

// 64 KiB of JSON schema per request (response_format's plus every tool's
// parameters): checked before the schemas are converted to a grammar, whose
// cost grows faster than the schema (a 270 KB schema took 1.2 s on the HTTP
// thread and gave 4.3 MB of GBNF). Real schemas are a few KiB.
inline constexpr size_t kMaxSchemaBytes = 64 << 10;

struct ChatRequest;
// InvalidArgument when the request's schemas add up to more than
// kMaxSchemaBytes.
Status CheckSchemaBytes(const ChatRequest& request);

// An immutable, checked grammar: copied (cheaply) into each request's
// GrammarState. Thread safety: const methods may be called concurrently.
class Grammar {
 public:
  // Parses `spec.gbnf` and feeds it the prefill tokens. InvalidArgument: it
  // is over kMaxGrammarBytes, does not parse (with an escaped excerpt of
  // at most ~200 bytes of llama.cpp's error), has no root rule or a left
  // recursion, has a rule of more than kMaxGrammarStacks alternatives,
  // refuses its prefill, or then holds more than kMaxGrammarStacks stacks.
  // REQUIRES: spec.gbnf is not empty; `model` outlives the result.
  static Result<std::shared_ptr<const Grammar>> Compile(const Model& model, const GrammarSpec& spec);
  ~Grammar();
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  size_t n_stacks() const;

 private:
  friend class GrammarState;
  Grammar() = default;
  llama_grammar* grammar_ = nullptr;  // owned
};

// One request's position in a Grammar. Not thread-safe: one per request.
class GrammarState {
 public:
  explicit GrammarState(const Grammar& grammar);
  ~GrammarState();
  GrammarState(const GrammarState&) = delete;
  GrammarState& operator=(const GrammarState&) = delete;

  // Whether the grammar allows `token` next (a lazy grammar still waiting
  // for its trigger allows every token). Costs one candidate.
  bool Allows(int32_t token) const;
  // For each token in `tokens`, whether the grammar allows it next
  // (allowed[i] for tokens[i]). REQUIRES: allowed.size() == tokens.size().
  void Check(std::span<const int32_t> tokens, std::span<bool> allowed) const;
  // Advances past `token`. InvalidArgument: the grammar does not allow it,
  // or afterwards holds more than kMaxGrammarStacks stacks (the state is
  // unusable after an error). REQUIRES: Allows(token).
  [[nodiscard]] Status Accept(int32_t token);

  // Whether the text so far is a whole sentence of the grammar (one of its
  // stacks is empty, so an end-of-generation token is allowed next). False
  // while a lazy grammar still waits for its trigger.
  bool Complete() const;
  // Whether `token` spells only whitespace (space, tab, CR, LF; at least
  // one byte). Costs one detokenization.
  bool IsBlank(int32_t token) const;
  // The vocabulary's end-of-generation token (end of sequence, else end of
  // turn); -1 when it has neither.
  int32_t EndToken() const;

  size_t n_stacks() const;

 private:
  friend class Grammar;  // Compile feeds the prefill through a state
  llama_grammar* grammar_ = nullptr;  // owned
};

}  // namespace agentkv::engine
