// AgentStore::ReadHeldBlocks: the blocks of another tier's manifest that this
// disk already holds (a remote fetch takes those from here, not the network).

#include "store/agent_store.h"
#include "store/block_read.h"
#include "store/store_ids.h"

namespace agentkv {

Result<std::vector<std::optional<KvBlock>>> AgentStore::ReadHeldBlocks(std::string_view ns_name,
                                                                       const AgentRecord& rec) {
  AGENTKV_RETURN_IF_ERROR(ValidateName("namespace", ns_name));
  std::vector<std::optional<KvBlock>> held(rec.blocks.size());
  std::vector<std::optional<BlockSource>> sources;
  {
    std::lock_guard<std::mutex> l(mu_);
    AGENTKV_ASSIGN_OR_RETURN(NamespaceState * ns, PrepareLocked(ns_name));
    if (ns == nullptr) return held;
    sources = SourcesLocked(*ns, rec.blocks);
  }
  // Read (decoded, checksummed) without the lock, as a load reads; the checks
  // against `rec` and the bookkeeping of bad or vanished files
  // (ReadBlockLocked) under it. A block that moved meanwhile (its pack
  // dropped, the block written again elsewhere) is read again there.
  std::vector<std::optional<Result<DecodedBlock>>> read = ReadSources(sources);
  std::lock_guard<std::mutex> l(mu_);
  NamespaceState* ns = FindNamespaceLocked(ns_name);
  if (ns == nullptr) return held;  // erased meanwhile
  const std::vector<std::optional<BlockSource>> now = SourcesLocked(*ns, rec.blocks);
  for (uint32_t i = 0; i < rec.blocks.size(); ++i) {
    if (!sources[i] || !now[i]) continue;  // not held here
    std::optional<Result<DecodedBlock>> ahead;
    if (*sources[i] == *now[i]) ahead = std::move(read[i]);
    auto block = ReadBlockLocked(ns, rec, i, std::move(ahead));
    if (block.ok()) held[i] = std::move(block).value();
  }
  return held;
}

}  // namespace agentkv
