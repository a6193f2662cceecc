#include "store/block_file.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "store/store_ids.h"
#include "util/hash.h"

namespace agentkv {
namespace {

using json = nlohmann::json;

constexpr std::string_view kZeroChecksum = "0000000000000000";
constexpr size_t kMaxTensorName = 256;

Status Bad(const std::string& why) { return Status::Corruption("block file: " + why); }

std::string ChecksumNeedle(std::string_view hex) { return "\"checksum\":\"" + std::string(hex) + "\""; }

// XXH3-64 over the header (with the checksum digits zeroed) and the data.
uint64_t FileChecksum(std::string_view header_zeroed, const std::vector<std::string_view>& data) {
  Xxh3Stream h;
  h.Update(header_zeroed.data(), header_zeroed.size());
  for (std::string_view d : data) h.Update(d.data(), d.size());
  return h.Digest();
}

bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

Status CheckBlock(const KvBlock& block) {
  if (block.n_tokens == 0 || block.n_tokens > kBlockTokens) {
    return Status::InvalidArgument("block " + std::to_string(block.index) + ": n_tokens out of range");
  }
  uint64_t lo = uint64_t{block.index} * kBlockTokens, hi = lo + block.n_tokens;
  std::set<std::string_view> names;
  for (const KvTensor& t : block.tensors) {
    if (t.name.empty() || t.name.size() > kMaxTensorName || !IsHeaderText(t.name) || t.name == "__metadata__") {
      return Status::InvalidArgument("tensor name \"" + t.name.substr(0, 64) + "\" not allowed");
    }
    if (!names.insert(t.name).second) return Status::InvalidArgument("duplicate tensor " + t.name);
    if (t.data.size() != uint64_t{t.n_rows} * t.row_bytes) {
      return Status::InvalidArgument("tensor " + t.name + ": data size != n_rows * row_bytes");
    }
    if (t.n_rows > 0 && (t.first_pos < lo || uint64_t{t.first_pos} + t.n_rows > hi)) {
      return Status::InvalidArgument("tensor " + t.name + ": rows outside the block");
    }
  }
  return Status::OK();
}

}  // namespace

bool IsHeaderText(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\'; });
}

std::vector<std::string_view> EncodedBlockHeader::Pieces(const KvBlock& block) const {
  std::vector<std::string_view> out{header};
  for (const KvTensor& t : block.tensors) {
    out.emplace_back(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  }
  return out;
}

Result<EncodedBlockHeader> EncodeBlockHeader(const KvBlock& block, const BlockMeta& meta) {
  AGENTKV_RETURN_IF_ERROR(CheckBlock(block).WithContext("encode block"));
  if (!IsBlockId(meta.block_id) || (block.index == 0) != meta.parent_id.empty() ||
      (!meta.parent_id.empty() && !IsBlockId(meta.parent_id))) {
    return Status::InvalidArgument("encode block: bad block or parent id");
  }
  if (meta.fingerprint.empty() || !IsHeaderText(meta.fingerprint) || meta.kv_types.empty() ||
      !IsHeaderText(meta.kv_types)) {
    return Status::InvalidArgument("encode block: bad fingerprint or kv types");
  }
  json order = json::array();
  json header = json::object();
  uint64_t offset = 0;
  for (const KvTensor& t : block.tensors) {
    order.push_back({{"name", t.name}, {"first_pos", t.first_pos}});
    header[t.name] = {{"dtype", "U8"},
                      {"shape", {t.n_rows, t.row_bytes}},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  header["__metadata__"] = {
      {"format", kBlockFormat},          {"block_id", meta.block_id},
      {"parent_id", meta.parent_id},     {"index", std::to_string(block.index)},
      {"n_tokens", std::to_string(block.n_tokens)}, {"fingerprint", meta.fingerprint},
      {"kv_types", meta.kv_types},       {"tensors", order.dump()},
      {"checksum", kZeroChecksum},
  };
  EncodedBlockHeader out;
  std::string text = header.dump();  // ASCII only (checked above): cannot throw
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();
  out.header.resize(8);
  for (int i = 0; i < 8; ++i) out.header[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.header += text;
  std::vector<std::string_view> pieces = out.Pieces(block);
  pieces.erase(pieces.begin());
  out.checksum = FileChecksum(out.header, pieces);
  size_t at = out.header.find(ChecksumNeedle(kZeroChecksum));
  out.header.replace(at + 12, kZeroChecksum.size(), Hex64(out.checksum));
  out.file_bytes = out.header.size() + offset;
  return out;
}

Result<std::string> EncodeBlockFile(const KvBlock& block, const BlockMeta& meta) {
  AGENTKV_ASSIGN_OR_RETURN(EncodedBlockHeader enc, EncodeBlockHeader(block, meta));
  std::string out;
  out.reserve(enc.file_bytes);
  for (std::string_view p : enc.Pieces(block)) out.append(p);
  return out;
}

Result<uint64_t> BlockDataOffset(std::string_view head, uint64_t file_size) {
  if (file_size < 8 || head.size() < 8) return Bad("shorter than 8 bytes (" + std::to_string(file_size) + ")");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<uint8_t>(head[i])} << (8 * i);
  if (n > file_size - 8) return Bad("header length " + std::to_string(n) + " exceeds file size");
  if (n > kMaxBlockHeaderBytes) return Bad("header length " + std::to_string(n) + " too large");
  return 8 + n;
}

std::vector<std::span<uint8_t>> BlockFileLayout::DataPieces() {
  std::vector<std::span<uint8_t>> out;
  out.reserve(file_order.size());
  for (size_t k : file_order) out.emplace_back(decoded.block.tensors[k].data);
  return out;
}

Result<BlockFileLayout> DecodeBlockHeader(std::string_view head, uint64_t file_size,
                                          const std::shared_ptr<WarmMemory>& reserve) {
  AGENTKV_ASSIGN_OR_RETURN(const uint64_t data_offset, BlockDataOffset(head, file_size));
  if (head.size() < data_offset) return Status::InvalidArgument("block header: need the first " +
                                                                std::to_string(data_offset) + " bytes");
  std::string_view header_text = head.substr(8, data_offset - 8);
  const uint64_t data_size = file_size - data_offset;
  json header = json::parse(header_text.begin(), header_text.end(), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return Bad("header is not a JSON object");

  // Metadata: all strings.
  auto mit = header.find("__metadata__");
  if (mit == header.end() || !mit->is_object()) return Bad("no __metadata__");
  auto meta_str = [&](const char* key, std::string* out) {
    auto it = mit->find(key);
    if (it == mit->end() || !it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  BlockFileLayout layout;
  layout.data_offset = data_offset;
  DecodedBlock& out = layout.decoded;
  std::string format, index_s, n_tokens_s, order_s, checksum_s;
  if (!meta_str("format", &format) || !meta_str("block_id", &out.meta.block_id) ||
      !meta_str("parent_id", &out.meta.parent_id) || !meta_str("index", &index_s) ||
      !meta_str("n_tokens", &n_tokens_s) || !meta_str("fingerprint", &out.meta.fingerprint) ||
      !meta_str("kv_types", &out.meta.kv_types) || !meta_str("tensors", &order_s) ||
      !meta_str("checksum", &checksum_s)) {
    return Bad("missing or non-string metadata field");
  }
  if (format != kBlockFormat) return Bad("unknown format \"" + format.substr(0, 64) + "\"");

  // The checksum field, located so that FinishBlockFile can verify the whole
  // file once its data has been read.
  if (checksum_s.size() != 16 || !std::all_of(checksum_s.begin(), checksum_s.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      })) {
    return Bad("malformed checksum");
  }
  std::from_chars(checksum_s.data(), checksum_s.data() + 16, layout.checksum, 16);
  const std::string needle = ChecksumNeedle(checksum_s);
  size_t at = header_text.find(needle);
  if (at == std::string_view::npos || header_text.find(needle, at + 1) != std::string_view::npos) {
    return Bad("checksum field not found exactly once");
  }
  layout.zeroed_header.assign(head.substr(0, data_offset));
  layout.zeroed_header.replace(8 + at + 12, 16, kZeroChecksum);

  uint64_t index = 0, n_tokens = 0;
  if (!ParseU64(index_s, &index) || index > UINT32_MAX / kBlockTokens) return Bad("bad index");
  if (!ParseU64(n_tokens_s, &n_tokens) || n_tokens == 0 || n_tokens > kBlockTokens) return Bad("bad n_tokens");
  out.block.index = static_cast<uint32_t>(index);
  out.block.n_tokens = static_cast<uint32_t>(n_tokens);
  if (!IsBlockId(out.meta.block_id)) return Bad("bad block id");
  if ((index == 0) != out.meta.parent_id.empty() || (!out.meta.parent_id.empty() && !IsBlockId(out.meta.parent_id))) {
    return Bad("bad parent id");
  }
  if (out.meta.fingerprint.empty() || out.meta.kv_types.empty()) return Bad("empty fingerprint or kv types");

  json order = json::parse(order_s, nullptr, /*allow_exceptions=*/false);
  if (order.is_discarded() || !order.is_array()) return Bad("tensor list is not a JSON array");
  if (order.size() + 1 != header.size()) return Bad("tensor list does not match the header");

  struct Span { uint64_t begin, end; size_t tensor; };
  std::vector<Span> spans;
  const uint64_t lo = index * kBlockTokens, hi = lo + n_tokens;
  for (const json& item : order) {
    if (!item.is_object()) return Bad("tensor list entry is not an object");
    auto name_it = item.find("name");
    auto pos_it = item.find("first_pos");
    if (name_it == item.end() || !name_it->is_string() || pos_it == item.end() || !pos_it->is_number_unsigned()) {
      return Bad("tensor list entry malformed");
    }
    KvTensor t;
    t.name = name_it->get<std::string>();
    uint64_t first_pos = pos_it->get<uint64_t>();
    auto hit = header.find(t.name);
    if (t.name == "__metadata__" || hit == header.end() || !hit->is_object()) return Bad("tensor " + t.name.substr(0, 64) + " missing");
    auto dt = hit->find("dtype"), sh = hit->find("shape"), of = hit->find("data_offsets");
    if (dt == hit->end() || *dt != "U8") return Bad("tensor " + t.name + ": dtype is not U8");
    if (sh == hit->end() || !sh->is_array() || sh->size() != 2 || !(*sh)[0].is_number_unsigned() ||
        !(*sh)[1].is_number_unsigned()) {
      return Bad("tensor " + t.name + ": bad shape");
    }
    if (of == hit->end() || !of->is_array() || of->size() != 2 || !(*of)[0].is_number_unsigned() ||
        !(*of)[1].is_number_unsigned()) {
      return Bad("tensor " + t.name + ": bad data_offsets");
    }
    uint64_t rows = (*sh)[0].get<uint64_t>(), row_bytes = (*sh)[1].get<uint64_t>();
    uint64_t begin = (*of)[0].get<uint64_t>(), end = (*of)[1].get<uint64_t>();
    if (rows > UINT32_MAX || row_bytes > UINT32_MAX || first_pos > UINT32_MAX) return Bad("tensor " + t.name + ": too large");
    if (begin > end || end > data_size) return Bad("tensor " + t.name + ": offsets out of range");
    if (end - begin != rows * row_bytes) return Bad("tensor " + t.name + ": shape does not match offsets");
    if (rows > 0 && (first_pos < lo || first_pos + rows > hi)) return Bad("tensor " + t.name + ": rows outside the block");
    t.row_bytes = static_cast<uint32_t>(row_bytes);
    t.n_rows = static_cast<uint32_t>(rows);
    t.first_pos = static_cast<uint32_t>(first_pos);
    for (const KvTensor& prev : out.block.tensors) {
      if (prev.name == t.name) return Bad("duplicate tensor " + t.name);
    }
    spans.push_back({begin, end, out.block.tensors.size()});
    out.block.tensors.push_back(std::move(t));
  }
  // Offsets must tile the data section exactly: no overlap, no hole, no tail.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expect = 0;
  for (const Span& s : spans) {
    if (s.begin != expect) return Bad("tensor data overlaps or leaves a hole");
    expect = s.end;
    layout.file_order.push_back(s.tensor);
  }
  if (expect != data_size) return Bad("data section has trailing bytes");
  // Sized only now that the sizes are known to add up to the file's.
  for (KvTensor& t : out.block.tensors) t.data = KvBytes(uint64_t{t.n_rows} * t.row_bytes, KvAllocator<uint8_t>(reserve));
  // Accept nothing the writer would refuse (found by block_file_fuzz): names,
  // fingerprint and kv types as EncodeBlockHeader checks them.
  if (!IsHeaderText(out.meta.fingerprint) || !IsHeaderText(out.meta.kv_types)) {
    return Bad("fingerprint or kv types not printable");
  }
  if (Status st = CheckBlock(out.block); !st.ok()) return Bad(st.message());
  return layout;
}

Result<DecodedBlock> FinishBlockFile(BlockFileLayout layout) {
  Xxh3Stream h;
  h.Update(layout.zeroed_header.data(), layout.zeroed_header.size());
  for (size_t k : layout.file_order) {
    const auto& d = layout.decoded.block.tensors[k].data;
    h.Update(d.data(), d.size());
  }
  if (h.Digest() != layout.checksum) return Bad("checksum mismatch");
  layout.decoded.meta.checksum = layout.checksum;
  return std::move(layout.decoded);
}

Result<DecodedBlock> DecodeBlockFile(std::string_view bytes) {
  AGENTKV_ASSIGN_OR_RETURN(const uint64_t data_offset, BlockDataOffset(bytes, bytes.size()));
  AGENTKV_ASSIGN_OR_RETURN(BlockFileLayout layout, DecodeBlockHeader(bytes.substr(0, data_offset), bytes.size()));
  size_t at = data_offset;
  for (std::span<uint8_t> piece : layout.DataPieces()) {
    if (!piece.empty()) std::memcpy(piece.data(), bytes.data() + at, piece.size());
    at += piece.size();
  }
  return FinishBlockFile(std::move(layout));
}

}  // namespace agentkv
