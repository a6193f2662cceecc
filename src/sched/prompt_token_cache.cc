#include "sched/prompt_token_cache.h"

#include <algorithm>
#include <vector>

namespace agentkv::sched {

size_t PromptTokenCache::BytesOf(const engine::PromptTokens& prompt) {
  return sizeof(engine::PromptTokens) + prompt.text.capacity() +
         prompt.plain.capacity() * sizeof(engine::TextRange) +
         prompt.tokenized.tokens.capacity() * sizeof(int32_t) +
         prompt.tokenized.spans.capacity() * sizeof(engine::TokenSpan);
}

std::shared_ptr<const engine::PromptTokens> PromptTokenCache::Get(const AgentKey& key) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru_pos);
  return it->second.prompt;
}

void PromptTokenCache::Put(const AgentKey& key, std::shared_ptr<const engine::PromptTokens> prompt) {
  const size_t bytes = BytesOf(*prompt) + key.ns.size() + key.agent_id.size();
  MutexLock lock(&mu_);
  if (auto it = entries_.find(key); it != entries_.end()) EraseLocked(it);
  if (bytes > max_bytes_) return;
  while (bytes_ + bytes > max_bytes_ && !lru_.empty()) EraseLocked(entries_.find(lru_.back()));
  lru_.push_front(key);
  entries_.emplace(key, Entry{std::move(prompt), lru_.begin(), bytes});
  bytes_ += bytes;
}

void PromptTokenCache::Erase(const AgentKey& key) {
  MutexLock lock(&mu_);
  if (auto it = entries_.find(key); it != entries_.end()) EraseLocked(it);
}

std::shared_ptr<const engine::PromptTokens> PromptTokenCache::LongestPrefix(const std::string& ns,
                                                                           std::string_view text,
                                                                           size_t min_bytes) const {
  std::vector<std::shared_ptr<const engine::PromptTokens>> candidates;
  {
    MutexLock lock(&mu_);
    for (auto it = entries_.lower_bound(AgentKey{ns, ""});
         it != entries_.end() && it->first.ns == ns && candidates.size() < kMaxPrefixScan; ++it) {
      candidates.push_back(it->second.prompt);
    }
  }
  std::shared_ptr<const engine::PromptTokens> best;
  size_t best_bytes = 0;
  for (auto& c : candidates) {
    const size_t n = std::min(c->text.size(), text.size());
    const size_t common = static_cast<size_t>(std::mismatch(text.begin(), text.begin() + n, c->text.begin()).first -
                                              text.begin());
    if (common >= min_bytes && common > best_bytes) {
      best_bytes = common;
      best = std::move(c);
    }
  }
  return best;
}

void PromptTokenCache::EraseLocked(std::map<AgentKey, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru_pos);
  entries_.erase(it);
}

size_t PromptTokenCache::bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

size_t PromptTokenCache::size() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace agentkv::sched
