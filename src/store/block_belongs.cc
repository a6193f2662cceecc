#include "store/block_belongs.h"

#include <string>

namespace agentkv {

Status CheckBlockBelongs(const DecodedBlock& dec, const AgentRecord& rec, uint32_t i, std::string_view fingerprint) {
  const BlockRef& ref = rec.blocks[i];
  const BlockMeta& m = dec.meta;
  const std::string_view parent = i == 0 ? std::string_view() : std::string_view(rec.blocks[i - 1].id);
  if (m.block_id != ref.id || m.parent_id != parent || dec.block.index != i || dec.block.n_tokens != ref.n_tokens) {
    return Status::Corruption("block file: belongs to another block");
  }
  if (m.fingerprint != fingerprint) return Status::Corruption("block file: model fingerprint " + m.fingerprint + " differs");
  if (m.kv_types != rec.kv_types) {
    return Status::Corruption("block file: kv types " + m.kv_types + " differ from the manifest's");
  }
  return Status::OK();
}

}  // namespace agentkv
