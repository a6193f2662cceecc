#include "sched/turn_prompter.h"

#include "sched/chat_request.h"
#include "sched/side_request.h"

namespace agentkv::sched {

TurnPrompter::TurnPrompter(const engine::Model& model, const engine::Tokenizer& tokenizer,
                           const std::string& chat_template, api::ReasoningFormat reasoning_format,
                           int tokenize_pieces, AgentTiers& tiers, SchedulerMetrics& metrics)
    : model_(model), tokenizer_(tokenizer), chat_format_(engine::ChatFormat::Create(model, tokenizer, chat_template)),
      reasoning_format_(reasoning_format), tokenize_pieces_(tokenize_pieces), tiers_(tiers), metrics_(metrics) {}

// Client text (message contents, a completion prompt) is marked plain: a
// "<|im_start|>" or "</s>" in it is text, never a special token.
Result<engine::ChatPrompt> TurnPrompter::Render(const api::GenerationRequest& r) const {
  if (r.kind == api::RequestKind::kCompletion) {
    engine::ChatPrompt p;
    p.rendered = engine::Tokenizer::RenderPlain(r.prompt);
    return p;
  }
  engine::ChatRequest chat = ToChatRequest(r, reasoning_format_);
  AGENTKV_RETURN_IF_ERROR(engine::CheckSchemaBytes(chat));  // before their conversion to a grammar
  return chat_format_->Render(chat);
}

int64_t TurnPrompter::CountTokens(const api::GenerationRequest& request) const {
  Result<engine::ChatPrompt> prompt = Render(request);
  if (!prompt.ok()) return 0;
  const engine::RenderedPrompt& rendered = prompt.value().rendered;
  return static_cast<int64_t>(tokenizer_.Tokenize(rendered.text, true, rendered.plain).tokens.size());
}

// The full tokenization, in pieces, is on the path to a new agent's first
// token, and to a returning agent's whose manifest records no prompt prefix:
// where another agent of the namespace sent the same system text, the prompt
// is tokenized from that agent's last prompt instead (a team's newcomers
// otherwise each tokenize the shared text, on the cores their team decodes
// with, before they queue).
engine::TokenizedText TurnPrompter::Tokenize(const AgentKey& key, bool isolated, const engine::RenderedPrompt& prompt,
                                             std::shared_ptr<const engine::PromptTokens>* entry) const {
  std::shared_ptr<const engine::PromptTokens> prev;
  if (!key.agent_id.empty()) prev = tiers_.PreviousPrompt(key, std::chrono::milliseconds(kPromptReadWaitMs));
  if (prev == nullptr && !isolated) prev = tiers_.NamespacePrompt(key.ns, prompt.text);
  size_t reused = 0;
  engine::TokenizedText tokens = prev != nullptr
                                     ? tokenizer_.TokenizeExtending(*prev, prompt.text, prompt.plain, &reused)
                                     : tokenizer_.TokenizeInPieces(prompt.text, prompt.plain, tokenize_pieces_);
  metrics_.AddTokenized(tokens.tokens.size(), reused);
  if (!key.agent_id.empty()) {
    *entry = std::make_shared<const engine::PromptTokens>(engine::PromptTokens{prompt.text, prompt.plain, tokens});
  }
  return tokens;
}

Status TurnPrompter::Prepare(api::GenerationRequest& request, int64_t context_tokens, PreparedPrompt* out) const {
  const AgentKey key{request.namespace_id, request.agent_id};
  Result<engine::ChatPrompt> rendered = Render(request);
  if (!rendered.ok()) return rendered.status();
  engine::ChatPrompt& prompt = rendered.value();
  if (request.kind == api::RequestKind::kChat && !key.agent_id.empty()) {
    out->head_bytes = HeadBytes(*chat_format_, ToChatRequest(request, reasoning_format_), prompt.rendered.text);
  }
  out->fresh = Tokenize(key, request.isolated, prompt.rendered, &out->prompt_entry);
  out->plain = prompt.rendered.plain;
  out->prompt = std::move(prompt.rendered.text);
  if (!prompt.grammar.gbnf.empty()) {  // its cost is decided here, before the inference thread sees it
    Result<std::shared_ptr<const engine::Grammar>> grammar = engine::Grammar::Compile(model_, prompt.grammar);
    if (!grammar.ok()) return grammar.status();
    out->grammar = std::move(grammar).value();
  }
  out->reply_format = std::move(prompt.reply_format);
  for (std::string& stop : prompt.extra_stops) request.sampling.stop.push_back(std::move(stop));
  const int64_t n_prompt = static_cast<int64_t>(out->fresh.tokens.size());
  if (n_prompt >= context_tokens) {
    // The numbers travel as data: each API words them as its clients parse them.
    return Status::OutOfRange("The prompt is " + std::to_string(n_prompt) + " tokens; the context holds " +
                              std::to_string(context_tokens) + " tokens including the reply.")
        .WithQuantity({n_prompt, context_tokens});
  }
  return Status::OK();
}

}  // namespace agentkv::sched
