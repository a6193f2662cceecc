#pragma once
// TurnPlan: what to reuse of an agent's cached tokens for a new prompt, and
// which tokens to prefill. Combines character-level prefix matching
// (prefix/) with a fresh tokenization of the prompt (engine/).
//
// How the remainder is tokenized: the prompt P is tokenized whole (cheap next
// to prefill); cached tokens [0, n_keep) are kept and P's own tokens from the
// first one that starts exactly where the kept tokens end are appended. If P's
// tokenization has no token boundary there (BPE merged across it), n_keep
// shrinks to the nearest boundary both tokenizations share. So no special
// token (BOS) is ever inserted mid-context, no SentencePiece dummy space
// appears mid-text, and every kept token's characters are in P.
//
// Special tokens are compared by token, not by character: the kept tokens'
// special tokens (Tokenizer::IsSpecial: BOS, turn markers) must be exactly
// P's special tokens over the same characters (same id, same span), else
// n_keep ends before the first one that differs. A client's text that spells
// a template token ("</s><s>system") is plain in P's tokenization, so it never
// continues a cache whose tokens at those characters were real template
// tokens, and the reverse. Plain tokens may be spelled differently (a
// generated reply, byte fallback): the same characters as text either way.
//
// Pure function of its inputs; thread-compatible.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer.h"
#include "kv/block_pool.h"
#include "prefix/prefix_match.h"
#include "store/agent_record.h"

namespace agentkv::sched {

// An agent's cached sequence: the tokens in its KV and their text.
struct CachedSequence {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<engine::TokenSpan> spans;  // one per token, into text
  // The last prompt's tokenization when it is the first prompt.n_tokens
  // tokens (set by the scheduler when a turn starts, kept in the manifest).
  PromptPrefix prompt;
};

struct TurnPlan {
  MatchType match = MatchType::kMiss;
  uint32_t n_keep = 0;                         // cached tokens reused
  std::vector<int32_t> new_tokens;             // to prefill after them (>= 1)
  std::vector<engine::TokenSpan> new_spans;    // into the prompt
};

// Plans a turn. `fresh` is the prompt tokenized by `tokenizer` with BOS and
// the prompt's plain ranges (done off the inference thread, see
// Scheduler::Submit). `max_reusable` caps n_keep (what the cache source can
// restore, e.g. RestorablePrefix); the result's n_keep <= max_reusable.
TurnPlan PlanTurn(const engine::Tokenizer& tokenizer, const engine::TokenizedText& fresh,
                  const CachedSequence& cached, std::string_view prompt, uint32_t max_reusable,
                  const MatchOptions& options = {});
// The same, tokenizing the prompt itself (all of it parsed for specials).
TurnPlan PlanTurn(const engine::Tokenizer& tokenizer, const CachedSequence& cached, std::string_view prompt,
                  uint32_t max_reusable, const MatchOptions& options = {});

// The spans prefix/ understands: aligned tokens only (the run before the
// first unaligned token, see engine::TokenizedText::aligned).
std::vector<TokenSpan> MatchableSpans(const std::vector<engine::TokenSpan>& spans, size_t text_size);

// How many of the first `n_matchable` cached tokens agree with `fresh` on
// special tokens: the largest n such that the special tokens among
// cached[0, n) are exactly fresh's special tokens whose spans end at or
// before cached[n - 1]'s end (same ids, same spans, same order).
uint32_t TokensAgreeingOnSpecials(const engine::Tokenizer& tokenizer, const engine::TokenizedText& fresh,
                                  const CachedSequence& cached, size_t n_matchable);

// The new turn's prompt as the first tokens of the agent's sequence, when
// they are exactly its fresh tokenization: the cached tokens kept by `plan`
// equal the fresh ones (they may not: the plan keeps cached tokens by
// characters, and sampled tokens need not be the text's tokenization), and
// the plan's new tokens are the rest of them. Else unknown ({}). Pure.
PromptPrefix PromptPrefixOf(const engine::TokenizedText& fresh, std::string_view prompt,
                            const std::vector<engine::TextRange>& plain, const CachedSequence& cached,
                            const TurnPlan& plan);

// How many of the first `n_keep` cached tokens lie at or past the first one
// that differs from `fresh` (the prompt's own tokenization): 0 when the turn's
// token sequence is exactly what a cold prefill of the prompt computes. Plain
// tokens are kept by characters, so a reply the model wrote as other tokens
// than its text's tokenization (the bundled model wrote "leveleduclear" as
// level|ed|uc|lear where the tokenizer says level|ed|u|clear), echoed back by
// the client, stays as the model wrote it: the turn then equals a cold
// prefill of its own token sequence, not of the prompt's text
// (usage.agentkv.respelled_tokens; docs/prefix-matching.md). Pure.
uint32_t RespelledTokens(const engine::TokenizedText& fresh, const CachedSequence& cached, uint32_t n_keep);

// How many leading `blocks` have the ids `expected` (the ids the tokens
// imply, ComputeBlockIds): the blocks that really belong to this token
// sequence. Pure.
size_t MatchingBlocks(const std::vector<PoolBlock>& blocks, const std::vector<std::string>& expected);

}  // namespace agentkv::sched
