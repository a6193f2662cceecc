#include "sched/turn_plan.h"

#include <algorithm>
#include <span>
#include <unordered_set>

namespace agentkv::sched {

std::vector<TokenSpan> MatchableSpans(const std::vector<engine::TokenSpan>& spans, size_t text_size) {
  std::vector<TokenSpan> out;
  out.reserve(spans.size());
  uint32_t last_end = 0;
  for (const auto& s : spans) {
    if (s.begin == engine::kUnalignedSpan || s.end > text_size || s.begin < last_end || s.end < s.begin) break;
    out.push_back({s.begin, s.end});
    last_end = s.end;
  }
  return out;
}

uint32_t TokensAgreeingOnSpecials(const engine::Tokenizer& tokenizer, const engine::TokenizedText& fresh,
                                  const CachedSequence& cached, size_t n_matchable) {
  struct SpecialAt {
    size_t index;
    engine::TokenSpan span;
    int32_t token;
  };
  auto specials = [&](const std::vector<int32_t>& tokens, const std::vector<engine::TokenSpan>& spans, size_t n) {
    std::vector<SpecialAt> out;
    for (size_t i = 0; i < n; ++i) {
      if (tokenizer.IsSpecial(tokens[i])) out.push_back({i, spans[i], tokens[i]});
    }
    return out;
  };
  n_matchable = std::min(n_matchable, std::min(cached.tokens.size(), cached.spans.size()));
  const std::vector<SpecialAt> in_cache = specials(cached.tokens, cached.spans, n_matchable);
  const std::vector<SpecialAt> in_prompt =
      specials(fresh.tokens, fresh.spans, std::min(fresh.tokens.size(), fresh.spans.size()));
  size_t n = n_matchable;
  for (size_t k = 0; k < in_cache.size() || k < in_prompt.size(); ++k) {
    const SpecialAt* c = k < in_cache.size() ? &in_cache[k] : nullptr;
    const SpecialAt* f = k < in_prompt.size() ? &in_prompt[k] : nullptr;
    if (c != nullptr && f != nullptr && c->token == f->token && c->span.begin == f->span.begin &&
        c->span.end == f->span.end) {
      continue;
    }
    // The first disagreement: the cache's special is not kept, and no kept
    // token reaches into the prompt's (a zero-width one: up to it, exclusive).
    if (c != nullptr) n = std::min(n, c->index);
    if (f != nullptr && f->span.begin != engine::kUnalignedSpan) {
      const bool zero_width = f->span.end == f->span.begin;
      while (n > 0) {
        const uint32_t end = cached.spans[n - 1].end;
        if (end < f->span.begin || (end == f->span.begin && !zero_width)) break;
        --n;
      }
    }
    break;
  }
  return static_cast<uint32_t>(n);
}

TurnPlan PlanTurn(const engine::Tokenizer& tokenizer, const CachedSequence& cached, std::string_view prompt,
                  uint32_t max_reusable, const MatchOptions& options) {
  return PlanTurn(tokenizer, tokenizer.Tokenize(prompt, /*add_bos=*/true), cached, prompt, max_reusable, options);
}

TurnPlan PlanTurn(const engine::Tokenizer& tokenizer, const engine::TokenizedText& fresh,
                  const CachedSequence& cached, std::string_view prompt, uint32_t max_reusable,
                  const MatchOptions& options) {
  TurnPlan plan;
  auto cold = [&]() {
    plan.match = MatchType::kMiss;
    plan.n_keep = 0;
    plan.new_tokens = fresh.tokens;
    plan.new_spans = fresh.spans;
    return plan;
  };
  const std::vector<TokenSpan> spans = MatchableSpans(cached.spans, cached.text.size());
  if (spans.empty() || cached.tokens.empty()) return cold();
  const PrefixMatch m = MatchPrefix(cached.text, spans, prompt, options);
  if (m.cold()) return cold();

  // Token boundaries of the fresh tokenization (a token with text starts there).
  std::unordered_set<uint32_t> fresh_begins;
  for (const auto& s : fresh.spans) {
    if (s.begin != engine::kUnalignedSpan && s.end > s.begin) fresh_begins.insert(s.begin);
  }
  uint32_t n_keep = static_cast<uint32_t>(std::min<size_t>(m.n_keep_tokens, max_reusable));
  n_keep = std::min(n_keep, TokensAgreeingOnSpecials(tokenizer, fresh, cached, spans.size()));
  // Shrink to a boundary both tokenizations share, keeping >= 1 token to feed.
  while (n_keep > 0) {
    const uint32_t end = spans[n_keep - 1].end;
    if (end < prompt.size() && fresh_begins.count(end) != 0) break;
    --n_keep;
  }
  // A kept run of only leading specials (BOS) is no reuse worth reporting.
  if (n_keep == 0 || spans[n_keep - 1].end == 0) return cold();
  const uint32_t resume = spans[n_keep - 1].end;
  size_t first = 0;
  while (first < fresh.spans.size() && !(fresh.spans[first].begin == resume && fresh.spans[first].end > resume)) {
    ++first;
  }
  plan.match = m.type;
  plan.n_keep = n_keep;
  plan.new_tokens.assign(fresh.tokens.begin() + static_cast<ptrdiff_t>(first), fresh.tokens.end());
  plan.new_spans.assign(fresh.spans.begin() + static_cast<ptrdiff_t>(first), fresh.spans.end());
  return plan;
}

PromptPrefix PromptPrefixOf(const engine::TokenizedText& fresh, std::string_view prompt,
                            const std::vector<engine::TextRange>& plain, const CachedSequence& cached,
                            const TurnPlan& plan) {
  const size_t n_keep = plan.n_keep;
  if (!fresh.aligned || fresh.tokens.empty() || n_keep + plan.new_tokens.size() != fresh.tokens.size() ||
      n_keep > cached.tokens.size() || fresh.spans.back().end > prompt.size()) {
    return {};
  }
  for (size_t i = 0; i < n_keep; ++i) {
    if (cached.tokens[i] != fresh.tokens[i] || cached.spans[i].begin != fresh.spans[i].begin ||
        cached.spans[i].end != fresh.spans[i].end) {
      return {};
    }
  }
  PromptPrefix p;
  p.n_tokens = static_cast<uint32_t>(fresh.tokens.size());
  p.text_bytes = static_cast<uint32_t>(prompt.size());
  for (const engine::TextRange& r : plain) {
    p.plain.push_back({static_cast<uint32_t>(r.begin), static_cast<uint32_t>(r.end)});
  }
  return p;
}

uint32_t RespelledTokens(const engine::TokenizedText& fresh, const CachedSequence& cached, uint32_t n_keep) {
  const size_t n = std::min<size_t>(n_keep, cached.tokens.size());
  return static_cast<uint32_t>(n - CommonTokenPrefix(std::span(cached.tokens).first(n), fresh.tokens));
}

size_t MatchingBlocks(const std::vector<PoolBlock>& blocks, const std::vector<std::string>& expected) {
  size_t n = 0;
  while (n < blocks.size() && n < expected.size() && blocks[n].id == expected[n]) ++n;
  return n;
}

}  // namespace agentkv::sched
