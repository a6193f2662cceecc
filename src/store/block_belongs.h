#pragma once
// Whether a decoded block file is block `i` of an agent's manifest: the check
// every tier (disk, remote) applies after a block verified on its own and
// before it is used. Pure; thread-safe.

#include <cstdint>
#include <string_view>

#include "store/agent_record.h"
#include "store/block_file.h"
#include "util/status.h"

namespace agentkv {

// OK if `dec` carries rec.blocks[i]'s id, parent id (the previous block's, ""
// for block 0), index i, n_tokens, the model `fingerprint` and the manifest's
// kv types. Corruption("block file: ...") otherwise.
// REQUIRES: i < rec.blocks.size().
Status CheckBlockBelongs(const DecodedBlock& dec, const AgentRecord& rec, uint32_t i, std::string_view fingerprint);

}  // namespace agentkv
