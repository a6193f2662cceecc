#pragma once
// Block files: one KvBlock as a safetensors file (format: docs/store-format.md).
//
//   [8 bytes: header length N, little endian][N bytes: JSON header, padded
//   with spaces to a multiple of 8][data: the tensors' bytes, back to back]
//
// One tensor per KvTensor (dtype "U8", shape [n_rows, row_bytes]); the
// "__metadata__" strings carry the block id, parent id, index, n_tokens, the
// tensors' order and first positions, the model fingerprint, the kv types and
// a checksum: XXH3-64 over the whole file with the checksum's own 16 hex
// digits read as '0's. So a flipped bit anywhere (length, header or data) is
// detected, and the file verifies on its own, without its manifest.
//
// Pure functions on bytes: no I/O, no global state; thread-safe.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/kv_block.h"
#include "util/status.h"

namespace agentkv {

inline constexpr std::string_view kBlockFormat = "agentkv.block.v1";
inline constexpr uint64_t kMaxBlockHeaderBytes = 64ull << 20;

struct BlockMeta {
  std::string block_id;   // 32 hex digits (store_ids.h BlockId)
  std::string parent_id;  // "" for block 0, else the previous block's id
  std::string fingerprint;
  std::string kv_types;
  uint64_t checksum = 0;  // set by EncodeBlockHeader / DecodeBlockFile
};

// The file minus the tensors' bytes, which the writer appends after `header`
// in tensor order (see Pieces), so MBs of KV are never copied.
struct EncodedBlockHeader {
  std::string header;  // 8-byte length + JSON + padding
  uint64_t checksum = 0;
  uint64_t file_bytes = 0;
  // header, then every tensor's data; views into `this` and `block`.
  std::vector<std::string_view> Pieces(const KvBlock& block) const;
};

// The one "printable" rule for the text a block header carries (tensor names,
// fingerprint, kv types; the manifest's kv types too): ASCII 0x20..0x7e
// without '"' or '\\', so it sits in the header's JSON unescaped.
bool IsHeaderText(std::string_view s);

// Validates `block` (KvBlock invariants, tensor names: 1..256 chars of
// IsHeaderText, unique, not "__metadata__"; data size =
// n_rows * row_bytes) and `meta` (ids well formed, parent "" iff index 0,
// non-empty IsHeaderText fingerprint and kv types). InvalidArgument on failure.
Result<EncodedBlockHeader> EncodeBlockHeader(const KvBlock& block, const BlockMeta& meta);

// The whole file as one string (tests and small blocks).
Result<std::string> EncodeBlockFile(const KvBlock& block, const BlockMeta& meta);

struct DecodedBlock {
  KvBlock block;
  BlockMeta meta;
};

// Parses and fully verifies a block file: header length against the file
// size before anything else, JSON well formed, every field present and typed,
// offsets in range, contiguous and non-overlapping, shapes matching offsets,
// rows inside the block, the checksum. Any failure is Corruption("block file:
// ..."); never crashes or throws, whatever the bytes. Same checks as the
// three steps below, which a reader uses to read tensor data in place.
Result<DecodedBlock> DecodeBlockFile(std::string_view bytes);

// Reading a block file in place, in three steps:
//   1. BlockDataOffset(first >= 8 bytes, file size) -> 8 + header length;
//   2. DecodeBlockHeader(the first 8 + header length bytes, file size): every
//      structural check of DecodeBlockFile; the tensors come back with their
//      data sized (contents unspecified) and DataPieces() lists those buffers
//      in the order their bytes follow the header in the file;
//   3. the caller fills the pieces with the file's data section, then
//      FinishBlockFile checks the checksum over header and data.
// Each step fails with Corruption("block file: ...") on bad bytes.
struct BlockFileLayout {
  DecodedBlock decoded;            // meta.checksum set by FinishBlockFile
  uint64_t data_offset = 0;        // 8 + header length: where the data section starts
  std::vector<size_t> file_order;  // tensor indices in file order
  std::string zeroed_header;       // the file's first data_offset bytes, checksum digits as '0'
  uint64_t checksum = 0;           // as the header records it
  // The tensors' data buffers in file order; they tile the data section.
  std::vector<std::span<uint8_t>> DataPieces();
};
Result<uint64_t> BlockDataOffset(std::string_view head, uint64_t file_size);
// REQUIRES head.size() >= BlockDataOffset(head, file_size) (InvalidArgument otherwise).
// The tensors' buffers are sized (uninitialized) with `reserve`'s buffers where
// it holds their size (KvAllocator, kv_block.h); null: plain allocations.
Result<BlockFileLayout> DecodeBlockHeader(std::string_view head, uint64_t file_size,
                                          const std::shared_ptr<WarmMemory>& reserve = nullptr);
Result<DecodedBlock> FinishBlockFile(BlockFileLayout layout);

}  // namespace agentkv
