#pragma once
// Helpers shared by the store tests: deterministic fake agents and blocks.
// The KV bytes of a block depend only on its tokens, like real KV does on one
// model, so agents with a common prefix produce identical blocks.

#include <algorithm>
#include <string>
#include <vector>

#include "store/agent_record.h"
#include "store/agent_store.h"
#include "store/kv_block.h"

namespace agentkv::store_test {

inline constexpr char kFp[] = "fp0123456789abcdef";
inline constexpr char kKvTypes[] = "k:q4_0,v:q4_0";

// n tokens; the first n_shared are the same for every seed.
inline std::vector<int32_t> MakeTokens(size_t n, uint32_t seed, size_t n_shared = 0) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t s = i < n_shared ? 0x9e37u : seed * 7919u + 1;
    t[i] = static_cast<int32_t>((s * 2654435761u + i * 40503u) % 32000u);
  }
  return t;
}

// 2 layers x K/V; layer 1 is "sliding window" and keeps only the last 3 rows.
inline KvBlock MakeBlock(const std::vector<int32_t>& tokens, uint32_t index) {
  KvBlock b;
  b.index = index;
  size_t first = size_t{index} * kBlockTokens;
  b.n_tokens = static_cast<uint32_t>(std::min<size_t>(kBlockTokens, tokens.size() - first));
  const char* names[] = {"c0.l0.k", "c0.l0.v", "c0.l1.k", "c0.l1.v"};
  for (int t = 0; t < 4; ++t) {
    KvTensor x;
    x.name = names[t];
    x.row_bytes = t % 2 == 0 ? 18 : 10;
    uint32_t rows = t < 2 ? b.n_tokens : std::min<uint32_t>(3, b.n_tokens);
    x.first_pos = b.first_pos() + b.n_tokens - rows;
    x.n_rows = rows;
    for (uint32_t r = 0; r < rows; ++r) {
      int32_t tok = tokens[x.first_pos + r];
      for (uint32_t c = 0; c < x.row_bytes; ++c) x.data.push_back(static_cast<uint8_t>(tok * 31 + c * 7 + t));
    }
    b.tensors.push_back(std::move(x));
  }
  return b;
}

inline AgentRecord MakeRecord(const std::string& id, const std::vector<int32_t>& tokens) {
  AgentRecord r;
  r.agent_id = id;
  r.tokens = tokens;
  for (int32_t t : tokens) {
    uint32_t begin = static_cast<uint32_t>(r.text.size());
    r.text += "t" + std::to_string(t) + " ";
    r.spans.push_back({begin, static_cast<uint32_t>(r.text.size())});
  }
  r.kv_types = kKvTypes;
  r.layout_version = 1;
  return r;
}

// Serves MakeBlock(tokens, i); counts calls.
inline BlockProvider ProviderFor(std::vector<int32_t> tokens, int* calls = nullptr) {
  return [tokens = std::move(tokens), calls](uint32_t i, const std::string&) -> Result<KvBlock> {
    if (calls) ++*calls;
    return MakeBlock(tokens, i);
  };
}

inline AgentStoreOptions Options(FileSystem* fs, std::string cache_dir = "/cache") {
  AgentStoreOptions o;
  o.fs = fs;
  o.cache_dir = std::move(cache_dir);
  o.fingerprint = kFp;
  o.kv_types = kKvTypes;
  return o;
}

// Saves `tokens` as agent `id` in `ns`; returns the status.
inline Status Save(AgentStore* s, const std::string& ns, const std::string& id, const std::vector<int32_t>& tokens,
                   int* calls = nullptr) {
  auto r = s->SaveAgent(ns, MakeRecord(id, tokens), ProviderFor(tokens, calls));
  return r.ok() ? Status::OK() : r.status();
}

// True if the agent loads completely with exactly the expected tokens and blocks.
inline bool LoadsExactly(AgentStore* s, const std::string& ns, const std::string& id,
                         const std::vector<int32_t>& tokens) {
  auto r = s->LoadBlocks(ns, id);
  if (!r.ok() || !r->complete || r->record.tokens != tokens || r->valid_tokens != tokens.size()) return false;
  for (uint32_t i = 0; i < r->blocks.size(); ++i) {
    if (!(r->blocks[i] == MakeBlock(tokens, i))) return false;
  }
  return r->blocks.size() == (tokens.size() + kBlockTokens - 1) / kBlockTokens;
}

// Files under `dir` (a MemFileSystem path) whose path contains `part`.
template <typename Fs>
size_t CountFiles(Fs& fs, const std::string& part) {
  size_t n = 0;
  for (const auto& p : fs.AllFiles()) n += p.find(part) != std::string::npos;
  return n;
}

}  // namespace agentkv::store_test
