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
  std::vector<uint32_t> indexes;
  std::vector<std::string> paths;
  std::vector<uint64_t> file_bytes;
  {
    MutexLock l(&mu_);
    AGENTKV_ASSIGN_OR_RETURN(NamespaceState * ns, PrepareLocked(ns_name));
    if (ns == nullptr) return held;
    for (uint32_t i = 0; i < rec.blocks.size(); ++i) {
      auto it = ns->blocks.find(rec.blocks[i].id);
      if (it == ns->blocks.end()) continue;
      indexes.push_back(i);
      paths.push_back(BlockPath(*ns, rec.blocks[i].id));
      file_bytes.push_back(it->second.file_bytes);
    }
  }
  if (indexes.empty()) return held;
  // Read (decoded, checksummed) without the lock, as a load reads; the checks
  // against `rec` and the bookkeeping of bad or vanished files
  // (ReadBlockLocked) under it.
  std::vector<std::optional<Result<DecodedBlock>>> read(indexes.size());
  if (reader_.concurrent()) {
    std::vector<Result<DecodedBlock>> got = reader_.Read(paths, file_bytes);
    for (size_t k = 0; k < got.size(); ++k) read[k] = std::move(got[k]);
  }
  MutexLock l(&mu_);
  NamespaceState* ns = index_.Find(ns_name);
  if (ns == nullptr) return held;  // erased meanwhile
  for (size_t k = 0; k < indexes.size(); ++k) {
    auto block = ReadBlockLocked(ns, rec, indexes[k], std::move(read[k]));
    if (block.ok()) held[indexes[k]] = std::move(block).value();
  }
  return held;
}

}  // namespace agentkv
