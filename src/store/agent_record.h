#pragma once
// AgentRecord: what the disk tier remembers about one agent, besides its KV
// bytes. Plain data; upper layers fill it, the store persists it as the
// agent's manifest (manifest.h; format in docs/store-format.md).

#include <cstdint>
#include <string>
#include <vector>

namespace agentkv {

// Byte offsets [begin, end) of one token's characters in AgentRecord::text.
struct CharSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool operator==(const CharSpan&) const = default;
};

// One block the agent's KV consists of, in order.
struct BlockRef {
  std::string id;          // content address (store_ids.h BlockId)
  uint32_t n_tokens = 0;   // kBlockTokens, except for a partial last block
  uint64_t checksum = 0;   // the block file's checksum (block_file.h)
  uint64_t file_bytes = 0; // size of the block file
  bool operator==(const BlockRef&) const = default;
};

// The agent's last prompt, when its tokenization is the record's first
// n_tokens tokens: Tokenize(text[0, text_bytes), BOS, plain) gave exactly
// tokens[0, n_tokens) with spans[0, n_tokens). Lets a returning agent read
// after a restart tokenize only what its next prompt adds. n_tokens == 0:
// not known (then text_bytes == 0 and plain is empty).
struct PromptPrefix {
  uint32_t n_tokens = 0;
  uint32_t text_bytes = 0;
  std::vector<CharSpan> plain;  // client text where special-token text is ordinary text (sorted, disjoint)
  bool operator==(const PromptPrefix&) const = default;
};

struct AgentRecord {
  std::string ns;        // namespace (tenant)
  std::string agent_id;
  std::string text;      // the exact text the KV was computed from (any bytes)
  std::vector<int32_t> tokens;
  std::vector<CharSpan> spans;  // one per token
  std::vector<BlockRef> blocks; // filled by the store on save
  std::string kv_types;         // e.g. "k:q4_0,v:q4_0"; engine-defined, printable ASCII
  std::string fingerprint;      // model fingerprint; the store fills it on save
  uint32_t layout_version = 0;  // engine's per-sequence layout version
  int64_t created_ms = 0;       // set by the store (first save)
  int64_t updated_ms = 0;       // set by the store (every save)
  // Monotonic per agent: the store never replaces a manifest by one of a
  // lower version, nor by another content under the same version (a stale,
  // out-of-order save). 0 on save: the store assigns on-disk version + 1
  // (the caller opts out of the check). 0 when read from a manifest written
  // before versions existed.
  uint64_t version = 0;
  PromptPrefix prompt;  // optional in the manifest (absent: not known)
  // Bytes at the start of `text` that were the last prompt's system text and
  // tools as rendered (sched/side_request.h HeadBytes), <= text.size(); 0:
  // not known. Optional in the manifest. Lets the first request after a
  // restart be told from a side request as every later one is.
  uint32_t head_bytes = 0;

  bool operator==(const AgentRecord&) const = default;
};

}  // namespace agentkv
