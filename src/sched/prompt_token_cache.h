#pragma once
// PromptTokenCache: each agent's last prompt with its tokenization, so that
// the agent's next prompt (usually the same text plus a turn) is tokenized
// from it (engine::Tokenizer::TokenizeExtending) instead of from scratch: a
// returning agent's prompt costs tokenizing what it added, not its whole
// context (~50 ms at 35K tokens on the H200 host, several ms at 1K on 2 CPU
// cores, on every turn).
//
// Only a speed-up: TokenizeExtending gives the full tokenization from any
// entry, so a missing, evicted or stale entry changes nothing but speed.
// Entries hold prompt text: Erase drops an agent's on delete.
// A new agent's prompt is tokenized from another agent's entry of its
// namespace that shares the longest prefix with it (LongestPrefix: a team's
// system text and tools are then tokenized once per namespace, not once per
// agent); never across namespaces, and the caller skips it for isolated keys.
//
// Thread safety: every method may be called from any thread (one mutex).
// Invariants: bytes_ == sum of entries_' bytes <= max_bytes_ after each Put;
// lru_ lists entries_' keys, most recently used first.

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "engine/tokenizer.h"
#include "kv/block_pool.h"
#include "util/mutex.h"

namespace agentkv::sched {

class PromptTokenCache {
 public:
  explicit PromptTokenCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The agent's last prompt, or null.
  std::shared_ptr<const engine::PromptTokens> Get(const AgentKey& key);
  // Replaces the agent's entry; least recently used entries make room. A
  // prompt larger than the whole budget is not kept.
  void Put(const AgentKey& key, std::shared_ptr<const engine::PromptTokens> prompt);
  void Erase(const AgentKey& key);
  // Of the entries of namespace `ns`, the one whose text shares the longest
  // prefix with `text`, when that prefix is at least `min_bytes` long; else
  // null. Looks at up to kMaxPrefixScan of the namespace's entries (in key
  // order), compared outside the lock; not a use (the LRU order stays).
  std::shared_ptr<const engine::PromptTokens> LongestPrefix(const std::string& ns, std::string_view text,
                                                            size_t min_bytes) const;
  static constexpr size_t kMaxPrefixScan = 256;

  size_t bytes() const;
  size_t size() const;

  // Heap bytes an entry accounts for.
  static size_t BytesOf(const engine::PromptTokens& prompt);

 private:
  struct Entry {
    std::shared_ptr<const engine::PromptTokens> prompt;
    std::list<AgentKey>::iterator lru_pos;
    size_t bytes = 0;
  };
  void EraseLocked(std::map<AgentKey, Entry>::iterator it) REQUIRES(mu_);

  const size_t max_bytes_;
  mutable Mutex mu_;
  size_t bytes_ GUARDED_BY(mu_) = 0;
  std::list<AgentKey> lru_ GUARDED_BY(mu_);
  std::map<AgentKey, Entry> entries_ GUARDED_BY(mu_);
};

}  // namespace agentkv::sched
