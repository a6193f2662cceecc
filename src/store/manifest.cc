#include "store/manifest.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "store/kv_block.h"
#include "store/store_ids.h"
#include "util/hash.h"

namespace agentkv {
namespace {

using json = nlohmann::json;

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = uint32_t{static_cast<uint8_t>(in[i])} << 16;
    if (i + 1 < in.size()) v |= uint32_t{static_cast<uint8_t>(in[i + 1])} << 8;
    if (i + 2 < in.size()) v |= static_cast<uint8_t>(in[i + 2]);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kB64[v & 63] : '=';
  }
  return out;
}

bool Base64Decode(std::string_view in, std::string* out) {
  if (in.size() % 4 != 0) return false;
  out->clear();
  for (size_t i = 0; i < in.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      char c = in[i + j];
      const char* p = c ? std::strchr(kB64, c) : nullptr;
      if (c == '=' && i + 4 == in.size() && j >= 2) {
        ++pad;
      } else if (p == nullptr || pad > 0) {
        return false;
      }
      v = (v << 6) | (p ? static_cast<uint32_t>(p - kB64) : 0);
    }
    out->push_back(static_cast<char>((v >> 16) & 0xff));
    if (pad < 2) out->push_back(static_cast<char>((v >> 8) & 0xff));
    if (pad < 1) out->push_back(static_cast<char>(v & 0xff));
  }
  return true;
}

// Strict UTF-8 (what nlohmann accepts when dumping).
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    uint32_t cp;
    if ((c >> 5) == 6) {
      n = 1, cp = c & 0x1f;
    } else if ((c >> 4) == 14) {
      n = 2, cp = c & 0x0f;
    } else if ((c >> 3) == 30) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (size_t j = 1; j <= n; ++j) {
      uint8_t d = static_cast<uint8_t>(s[i + j]);
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

Status Corrupt(const std::string& why) { return Status::Corruption("manifest: " + why); }

// Byte ranges as a flat array [b0, e0, b1, e1, ...].
json FlatRanges(const std::vector<CharSpan>& ranges) {
  json a = json::array();
  for (const CharSpan& s : ranges) {
    a.push_back(s.begin);
    a.push_back(s.end);
  }
  return a;
}

// The inverse: false unless `a` is an array of an even number of unsigned
// 32-bit values.
bool ParseFlatRanges(const json& a, std::vector<CharSpan>* out) {
  if (!a.is_array() || a.size() % 2 != 0) return false;
  out->reserve(a.size() / 2);
  for (size_t i = 0; i < a.size(); i += 2) {
    const json& b = a[i];
    const json& e = a[i + 1];
    if (!b.is_number_unsigned() || !e.is_number_unsigned() || b.get<uint64_t>() > UINT32_MAX ||
        e.get<uint64_t>() > UINT32_MAX) {
      return false;
    }
    out->push_back({static_cast<uint32_t>(b.get<uint64_t>()), static_cast<uint32_t>(e.get<uint64_t>())});
  }
  return true;
}

json RecordToJson(const AgentRecord& r) {
  json j = json::object();
  j["namespace"] = r.ns;
  j["agent_id"] = r.agent_id;
  j["fingerprint"] = r.fingerprint;
  j["kv_types"] = r.kv_types;
  j["layout_version"] = r.layout_version;
  j["created_ms"] = r.created_ms;
  j["updated_ms"] = r.updated_ms;
  j["version"] = r.version;
  if (IsUtf8(r.text)) {
    j["text"] = r.text;
  } else {
    j["text_base64"] = Base64Encode(r.text);
  }
  j["tokens"] = r.tokens;
  j["spans"] = FlatRanges(r.spans);
  json blocks = json::array();
  for (const BlockRef& b : r.blocks) {
    blocks.push_back({{"id", b.id}, {"n_tokens", b.n_tokens}, {"checksum", Hex64(b.checksum)}, {"bytes", b.file_bytes}});
  }
  j["blocks"] = std::move(blocks);
  if (r.head_bytes > 0) j["head_bytes"] = r.head_bytes;
  if (r.prompt.n_tokens > 0) {
    j["prompt"] = {{"tokens", r.prompt.n_tokens}, {"bytes", r.prompt.text_bytes}, {"plain", FlatRanges(r.prompt.plain)}};
  }
  return j;
}

template <typename T>
bool GetInt(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return false;
  if (it->is_number_unsigned()) {
    uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    *out = static_cast<T>(v);
    return true;
  }
  int64_t v = it->get<int64_t>();
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) || v > static_cast<int64_t>(std::numeric_limits<T>::max())) return false;
  *out = static_cast<T>(v);
  return true;
}

bool GetStr(const json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

// Optional "prompt": {"tokens": n, "bytes": b, "plain": [b0,e0,...]}.
Status PromptFromJson(const json& j, PromptPrefix* p) {
  auto it = j.find("prompt");
  if (it == j.end()) return Status::OK();
  const json& pj = *it;
  auto plain = pj.is_object() ? pj.find("plain") : pj.end();
  if (!pj.is_object() || !GetInt(pj, "tokens", &p->n_tokens) || !GetInt(pj, "bytes", &p->text_bytes) ||
      plain == pj.end() || !ParseFlatRanges(*plain, &p->plain)) {
    return Corrupt("bad prompt");
  }
  return Status::OK();
}

Status RecordFromJson(const json& j, AgentRecord* r) {
  if (!j.is_object()) return Corrupt("record is not an object");
  if (!GetStr(j, "namespace", &r->ns) || !GetStr(j, "agent_id", &r->agent_id) ||
      !GetStr(j, "fingerprint", &r->fingerprint) || !GetStr(j, "kv_types", &r->kv_types) ||
      !GetInt(j, "layout_version", &r->layout_version) || !GetInt(j, "created_ms", &r->created_ms) ||
      !GetInt(j, "updated_ms", &r->updated_ms)) {
    return Corrupt("missing or mistyped field");
  }
  // Optional: manifests written before versions existed have none (version 0).
  if (j.contains("version") && !GetInt(j, "version", &r->version)) return Corrupt("mistyped version");
  // Optional: absent when not known (0).
  if (j.contains("head_bytes") && !GetInt(j, "head_bytes", &r->head_bytes)) return Corrupt("mistyped head_bytes");
  std::string b64;
  if (GetStr(j, "text", &r->text)) {
    if (j.contains("text_base64")) return Corrupt("both text and text_base64");
  } else if (!GetStr(j, "text_base64", &b64) || !Base64Decode(b64, &r->text)) {
    return Corrupt("no valid text");
  }
  auto tokens = j.find("tokens"), spans = j.find("spans"), blocks = j.find("blocks");
  if (tokens == j.end() || !tokens->is_array() || spans == j.end() || !spans->is_array() || blocks == j.end() ||
      !blocks->is_array()) {
    return Corrupt("tokens, spans or blocks missing");
  }
  r->tokens.reserve(tokens->size());
  for (const json& t : *tokens) {
    if (!t.is_number_integer()) return Corrupt("token is not an integer");
    int64_t v = t.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), INT64_MAX))
                                       : t.get<int64_t>();
    if (v < INT32_MIN || v > INT32_MAX) return Corrupt("token out of range");
    r->tokens.push_back(static_cast<int32_t>(v));
  }
  if (spans->size() != 2 * r->tokens.size()) return Corrupt("span count != token count");
  if (!ParseFlatRanges(*spans, &r->spans)) return Corrupt("bad span");
  for (const json& b : *blocks) {
    BlockRef ref;
    std::string checksum;
    if (!b.is_object() || !GetStr(b, "id", &ref.id) || !GetInt(b, "n_tokens", &ref.n_tokens) ||
        !GetStr(b, "checksum", &checksum) || !GetInt(b, "bytes", &ref.file_bytes) || checksum.size() != 16 ||
        Hex64(std::strtoull(checksum.c_str(), nullptr, 16)) != checksum) {
      return Corrupt("bad block entry");
    }
    ref.checksum = std::strtoull(checksum.c_str(), nullptr, 16);
    r->blocks.push_back(std::move(ref));
  }
  return PromptFromJson(j, &r->prompt);
}

}  // namespace

Status CheckRecord(const AgentRecord& r, bool check_blocks) {
  if (r.spans.size() != r.tokens.size()) return Status::InvalidArgument("record: span count != token count");
  for (const CharSpan& s : r.spans) {
    if (s.begin > s.end || s.end > r.text.size()) return Status::InvalidArgument("record: span outside the text");
  }
  if (r.head_bytes > r.text.size()) return Status::InvalidArgument("record: head_bytes outside the text");
  const PromptPrefix& p = r.prompt;
  if (p.n_tokens > r.tokens.size() || p.text_bytes > r.text.size() || (p.n_tokens == 0 && p.text_bytes != 0) ||
      (p.n_tokens > 0 && r.spans[p.n_tokens - 1].end > p.text_bytes)) {
    return Status::InvalidArgument("record: prompt outside the tokens or text");
  }
  for (size_t i = 0; i < p.plain.size(); ++i) {
    if (p.plain[i].begin > p.plain[i].end || p.plain[i].end > p.text_bytes ||
        (i > 0 && p.plain[i].begin < p.plain[i - 1].end)) {
      return Status::InvalidArgument("record: prompt's plain ranges not sorted inside the prompt");
    }
  }
  if (!check_blocks) return Status::OK();
  std::vector<std::string> ids = ComputeBlockIds(r.fingerprint, r.tokens);
  if (ids.size() != r.blocks.size()) return Status::InvalidArgument("record: block count does not match tokens");
  for (size_t i = 0; i < ids.size(); ++i) {
    uint32_t want = static_cast<uint32_t>(std::min<size_t>(kBlockTokens, r.tokens.size() - i * kBlockTokens));
    if (r.blocks[i].id != ids[i] || r.blocks[i].n_tokens != want) {
      return Status::InvalidArgument("record: block " + std::to_string(i) + " does not match tokens");
    }
  }
  return Status::OK();
}

Result<std::string> EncodeManifest(const AgentRecord& record) {
  AGENTKV_RETURN_IF_ERROR(CheckRecord(record, /*check_blocks=*/false).WithContext("encode manifest"));
  try {
    json rec = RecordToJson(record);
    std::string body = rec.dump();
    json doc = {{"format", kManifestFormat}, {"checksum", Hex64(Xxh3_64(body))}, {"record", std::move(rec)}};
    return doc.dump();
  } catch (const std::exception& e) {  // only non-UTF-8 ids/types could get here
    return Status::InvalidArgument(std::string("encode manifest: ") + e.what());
  }
}

Result<AgentRecord> DecodeManifest(std::string_view bytes) {
  json doc = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Corrupt("not a JSON object");
  std::string format, checksum;
  if (!GetStr(doc, "format", &format) || format != kManifestFormat) return Corrupt("unknown format");
  auto rec = doc.find("record");
  if (!GetStr(doc, "checksum", &checksum) || rec == doc.end()) return Corrupt("no checksum or record");
  std::string body;
  try {
    body = rec->dump();
  } catch (const std::exception&) {
    return Corrupt("record does not re-encode");
  }
  if (Hex64(Xxh3_64(body)) != checksum) return Corrupt("checksum mismatch");
  AgentRecord r;
  AGENTKV_RETURN_IF_ERROR(RecordFromJson(*rec, &r));
  Status st = CheckRecord(r, /*check_blocks=*/true);
  if (!st.ok()) return Corrupt(st.message());
  return r;
}

}  // namespace agentkv
