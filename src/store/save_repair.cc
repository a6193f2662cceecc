// AgentStore: what a failed save left behind, repaired in O(its agent).
//
// A failed save used to mark its namespace dirty, so the next save of ANY
// agent there rescanned every manifest and block file of the namespace (on
// the save thread), once per failure: on a full or failing disk, one rescan
// per turn. What a failed SaveAgentOnce can leave is known, and all of it
// concerns its own agent:
//   - temp files of its block files and manifest (WriteFileAtomically removes
//     them on failure, best effort);
//   - block files it wrote that no manifest names (the manifest never landed);
//   - its manifest renamed into place although the fsync of agents/ failed.
// The repair: fsync agents/ (what is seen is then what a crash keeps, as a
// rescan does first), remove this save's temp files, re-read this agent's
// manifest, recount references, delete unreferenced blocks. Unreferenced
// blocks can only be this save's: saves are serialized (save_mu_) and a
// successful one leaves none. Any step failing marks the namespace dirty:
// the next use rescans it, as before.
#include "store/agent_store.h"
#include "store/durable_io.h"
#include "store/manifest.h"

namespace agentkv {

void AgentStore::RepairFailedSaveLocked(NamespaceState* ns, const std::string& agent_id,
                                        const std::vector<std::string>& ids) {
  auto give_up = [&] { ns->dirty = true; };
  if (!ns->dirs_ready) return;  // failed creating its directories: nothing written
  Status st = fs_->SyncDir(AgentsDir(*ns));
  if (!st.ok()) return give_up();
  auto remove_temp = [&](const std::string& path) {
    Status removed = fs_->RemoveFile(path + std::string(kTempSuffix));
    return removed.ok() || removed.code() == StatusCode::kNotFound;
  };
  if (!remove_temp(ManifestPath(*ns, agent_id))) return give_up();
  for (const std::string& id : ids) {
    if (!remove_temp(BlockPath(*ns, id))) return give_up();
  }
  auto bytes = fs_->ReadFile(ManifestPath(*ns, agent_id));
  if (!bytes.ok()) {
    if (bytes.status().code() != StatusCode::kNotFound) return give_up();
    ns->agents.erase(agent_id);  // a new agent whose first save failed
  } else {
    auto rec = DecodeManifest(*bytes);
    if (!rec.ok() || rec->agent_id != agent_id || rec->ns != ns->name || rec->fingerprint != options_.fingerprint) {
      return give_up();  // the rescan quarantines it
    }
    auto known = ns->agents.find(agent_id);
    // The old manifest still in place keeps its state (last use included);
    // a new one that landed before the failure is adopted.
    if (known == ns->agents.end() || known->second.version != rec->version) {
      ns->agents[agent_id] = StateOfManifest(*rec, bytes->size());
    }
  }
  StoreIndex::RecountRefs(ns);
  CollectGarbageLocked(ns);  // marks the namespace dirty if a removal fails
}

}  // namespace agentkv
