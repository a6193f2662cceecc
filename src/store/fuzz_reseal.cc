#include "store/fuzz_reseal.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "store/block_file.h"
#include "store/manifest.h"
#include "store/store_ids.h"
#include "util/hash.h"

namespace agentkv::fuzz {
namespace {

using json = nlohmann::json;

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::vector<int32_t> SeedTokens(size_t n, uint32_t seed) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((seed * 2654435761u + i * 40503u) % 32000u);
  return t;
}

}  // namespace

bool ResealBlockFile(std::string* bytes) {
  if (bytes->size() < 8) return false;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<uint8_t>((*bytes)[i])} << (8 * i);
  if (n > bytes->size() - 8) return false;
  const std::string_view header(bytes->data() + 8, n);
  constexpr std::string_view kNeedle = "\"checksum\":\"";
  const size_t at = header.find(kNeedle);
  if (at == std::string_view::npos || at + kNeedle.size() + 17 > header.size()) return false;
  const size_t digits = 8 + at + kNeedle.size();
  if (!IsLowerHex(std::string_view(*bytes).substr(digits, 16)) || (*bytes)[digits + 16] != '"') return false;
  bytes->replace(digits, 16, "0000000000000000");
  bytes->replace(digits, 16, Hex64(Xxh3_64(*bytes)));
  return true;
}

bool ResealManifest(std::string* bytes) {
  json doc = json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("record")) return false;
  try {
    json& rec = doc["record"];
    if (rec.is_object() && rec.contains("tokens") && rec["tokens"].is_array() && rec.contains("fingerprint") &&
        rec["fingerprint"].is_string() && rec.contains("blocks") && rec["blocks"].is_array()) {
      std::vector<int32_t> tokens;
      bool ints = true;
      for (const json& t : rec["tokens"]) {
        if (!t.is_number_integer()) {
          ints = false;
          break;
        }
        tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
      }
      if (ints) {
        std::vector<std::string> ids = ComputeBlockIds(rec["fingerprint"].get<std::string>(), tokens);
        json& blocks = rec["blocks"];
        for (size_t i = 0; i < ids.size() && i < blocks.size(); ++i) {
          if (blocks[i].is_object()) blocks[i]["id"] = ids[i];
        }
      }
    }
    doc["checksum"] = Hex64(Xxh3_64(rec.dump()));
    *bytes = doc.dump();
  } catch (const std::exception&) {  // invalid UTF-8 in a string: leave as is
    return false;
  }
  return true;
}

std::string SeedBlockFile(uint32_t seed) {
  const uint32_t index = seed % 3;
  const uint32_t n_tokens = seed % 2 == 0 ? kBlockTokens : 1 + seed % 40;
  const std::vector<int32_t> tokens = SeedTokens(size_t{index} * kBlockTokens + n_tokens, seed);
  const std::vector<std::string> ids = ComputeBlockIds("fp-seed", tokens);
  KvBlock block;
  block.index = index;
  block.n_tokens = n_tokens;
  const uint32_t n_tensors = 1 + seed % 4;
  for (uint32_t t = 0; t < n_tensors; ++t) {
    KvTensor x;
    x.name = "c0.l" + std::to_string(t / 2) + (t % 2 == 0 ? ".k" : ".v");
    x.row_bytes = 2 + (seed + t) % 9;
    x.n_rows = t == 3 ? 0 : (t == 2 ? std::min<uint32_t>(3, n_tokens) : n_tokens);  // windowed, empty
    x.first_pos = block.first_pos() + n_tokens - x.n_rows;
    for (uint32_t i = 0; i < x.n_rows * x.row_bytes; ++i) x.data.push_back(static_cast<uint8_t>(i * 31 + seed));
    block.tensors.push_back(std::move(x));
  }
  BlockMeta meta{ids[index], index == 0 ? "" : ids[index - 1], "fp-seed", "k:q4_0,v:q4_0", 0};
  Result<std::string> bytes = EncodeBlockFile(block, meta);
  return bytes.ok() ? *bytes : std::string();
}

std::string SeedManifest(uint32_t seed) {
  AgentRecord r;
  r.ns = "default";
  r.agent_id = "agent-" + std::to_string(seed);
  r.fingerprint = "fp-seed";
  r.kv_types = "k:q4_0,v:q4_0";
  r.layout_version = 1;
  r.created_ms = 1700000000000 + seed;
  r.updated_ms = r.created_ms + 5;
  r.tokens = SeedTokens(seed % 3 == 0 ? 300 : 1 + seed % 17, seed);
  for (int32_t t : r.tokens) {
    const auto begin = static_cast<uint32_t>(r.text.size());
    r.text += seed % 4 == 1 ? std::string("\xff\xfe", 2) : "t" + std::to_string(t) + " ";  // base64 path too
    r.spans.push_back({begin, static_cast<uint32_t>(r.text.size())});
  }
  const std::vector<std::string> ids = ComputeBlockIds(r.fingerprint, r.tokens);
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto n = static_cast<uint32_t>(std::min<size_t>(kBlockTokens, r.tokens.size() - i * kBlockTokens));
    r.blocks.push_back({ids[i], n, 0x0123456789abcdefull + i, 4096 + i});
  }
  Result<std::string> bytes = EncodeManifest(r);
  return bytes.ok() ? *bytes : std::string();
}

}  // namespace agentkv::fuzz
