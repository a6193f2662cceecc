#pragma once
// Names and ids of the disk tier: file names derived from user-chosen names
// (validated by util/names.h) and content-addressed block ids.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/names.h"  // ValidateName: namespaces, agent ids, fingerprints
#include "util/status.h"

namespace agentkv {

inline constexpr size_t kBlockIdChars = 32;  // hex digits

// 32 lowercase hex digits of SHA-256(name): the on-disk name for a namespace
// directory or an agent's manifest. Hex keeps names unique on
// case-insensitive file systems and short whatever the id's length.
std::string NameHash(std::string_view name);

// True for exactly 32 lowercase hex digits.
bool IsBlockId(std::string_view s);

// The content address of one block: the first 32 hex digits of
// SHA-256("agentkv.block.v1" 0x00 parent_id 0x00 fingerprint 0x00 tokens),
// tokens as int32 little endian; parent_id is "" for block 0. Identical
// prefixes under one fingerprint thus get identical ids, and a block's id
// pins every token before it.
std::string BlockId(std::string_view parent_id, std::string_view fingerprint,
                    std::span<const int32_t> block_tokens);

// Ids of all blocks of a token sequence: ceil(n / kBlockTokens) ids; the
// last one covers the partial tail, if any.
std::vector<std::string> ComputeBlockIds(std::string_view fingerprint, std::span<const int32_t> tokens);

}  // namespace agentkv
