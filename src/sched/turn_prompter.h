#pragma once
// TurnPrompter: a request's prompt as a turn needs it, made on the
// submitting (HTTP) thread, never on the inference thread, which serves
// every agent: rendered (the chat template, or a completion's raw prompt),
// tokenized with BOS (from the agent's previous prompt where the tokenizer
// can extend it, AgentTiers::PreviousPrompt, or from another agent's prompt
// of its namespace with the same system text, AgentTiers::NamespacePrompt;
// else in pieces on up to
// `tokenize_pieces` threads), its grammar compiled and bounded, and refused
// when it does not fit the context.
//
// Thread safety: const after construction; any thread (the tokenizer, the
// chat format, the tiers and the metrics are safe to share).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/backend.h"
#include "engine/chat_format.h"
#include "engine/grammar.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "sched/agent_tiers.h"
#include "sched/metrics.h"

namespace agentkv::sched {

// A request's prompt, ready for admission.
struct PreparedPrompt {
  std::string prompt;                    // rendered (chat template applied)
  engine::TokenizedText fresh;           // prompt tokenized with BOS
  std::vector<engine::TextRange> plain;  // the prompt's ranges tokenized without special parsing
  // tools / response_format: constrains sampling (null: none), shared read-only.
  std::shared_ptr<const engine::Grammar> grammar;
  std::shared_ptr<const engine::ReplyFormat> reply_format;  // null: the reply is plain text
  size_t head_bytes = 0;  // of `prompt`: its system text and tools (HeadBytes); 0: unknown
  // This prompt as a PromptTokenCache entry (null for an implicit agent),
  // which admission remembers under the agent that runs it (a side
  // request's side agent, not the agent it named: else the main agent's
  // next prompt would be tokenized from the side request's).
  std::shared_ptr<const engine::PromptTokens> prompt_entry;
};

class TurnPrompter {
 public:
  // Not owned; all must outlive this. `tiers` is used only by Prepare.
  TurnPrompter(const engine::Model& model, const engine::Tokenizer& tokenizer, const std::string& chat_template,
               api::ReasoningFormat reasoning_format, int tokenize_pieces, AgentTiers& tiers,
               SchedulerMetrics& metrics);

  // Fills *out from `request` (whose sampling stops get the format's own
  // stop strings). InvalidArgument: it cannot be rendered (ChatFormat::
  // Render) or its grammar is refused (engine/grammar.h); OutOfRange with the
  // quantity {prompt tokens, context_tokens}: it has context_tokens tokens
  // or more (-> 400 context_length_exceeded).
  Status Prepare(api::GenerationRequest& request, int64_t context_tokens, PreparedPrompt* out) const;
  // The prompt, grammar and reply parser of a request (chat: ChatFormat;
  // completion: the raw prompt, marked plain).
  Result<engine::ChatPrompt> Render(const api::GenerationRequest& request) const;
  // Tokens of the request's prompt as Prepare counts them; 0 when it cannot be rendered.
  int64_t CountTokens(const api::GenerationRequest& request) const;

  // A returning agent being read (after a restart, or gone from the prompt
  // cache): Prepare waits this long for its read's manifest, which admission
  // waits for anyway, so that only what the new prompt adds is tokenized
  // instead of a full tokenization competing with the read for the cores (a
  // slow or stuck disk then costs the submitting thread that much). Long
  // enough for a short agent's read from a local disk (a 4K-token agent:
  // ~7 ms on the 2-core VM), short next to a long prompt's full tokenization.
  static constexpr int kPromptReadWaitMs = 20;

 private:
  // The prompt's tokens (with BOS), from `key`'s previous prompt where it
  // can, else (unless `isolated`) from another agent's prompt of the
  // namespace that shares a long enough prefix (AgentTiers::NamespacePrompt);
  // *entry: this prompt as a prompt-cache entry (not for an implicit agent).
  engine::TokenizedText Tokenize(const AgentKey& key, bool isolated, const engine::RenderedPrompt& prompt,
                                 std::shared_ptr<const engine::PromptTokens>* entry) const;

  const engine::Model& model_;
  const engine::Tokenizer& tokenizer_;
  const std::unique_ptr<engine::ChatFormat> chat_format_;
  const api::ReasoningFormat reasoning_format_;
  const int tokenize_pieces_;
  AgentTiers& tiers_;
  SchedulerMetrics& metrics_;
};

}  // namespace agentkv::sched
