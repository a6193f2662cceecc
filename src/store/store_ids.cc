#include "store/store_ids.h"

#include <algorithm>

#include "store/kv_block.h"
#include "util/hash.h"

namespace agentkv {

std::string NameHash(std::string_view name) { return Sha256Hex(name).substr(0, kBlockIdChars); }

bool IsBlockId(std::string_view s) {
  return s.size() == kBlockIdChars &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string BlockId(std::string_view parent_id, std::string_view fingerprint,
                    std::span<const int32_t> block_tokens) {
  std::string buf = "agentkv.block.v1";
  buf += '\0';
  buf += parent_id;
  buf += '\0';
  buf += fingerprint;
  buf += '\0';
  buf.reserve(buf.size() + block_tokens.size() * 4);
  for (int32_t t : block_tokens) {
    uint32_t u = static_cast<uint32_t>(t);
    for (int i = 0; i < 4; ++i) buf += static_cast<char>((u >> (8 * i)) & 0xff);
  }
  return Sha256Hex(buf).substr(0, kBlockIdChars);
}

std::vector<std::string> ComputeBlockIds(std::string_view fingerprint, std::span<const int32_t> tokens) {
  std::vector<std::string> ids;
  std::string parent;
  for (size_t begin = 0; begin < tokens.size(); begin += kBlockTokens) {
    size_t n = std::min<size_t>(kBlockTokens, tokens.size() - begin);
    parent = BlockId(parent, fingerprint, tokens.subspan(begin, n));
    ids.push_back(parent);
  }
  return ids;
}

}  // namespace agentkv
