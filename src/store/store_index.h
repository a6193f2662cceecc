#pragma once
// StoreIndex: AgentStore's in-memory picture of its cache directory. Per
// namespace: the agents (the state their manifests give) and the block files
// known to be on disk, each with the number of agents whose manifest names it;
// and what can be asked of that picture alone: an agent's summary, the
// directory's totals, the least recently used agent. No file is touched here:
// AgentStore (agent_store.h) reads and writes the files and keeps this in
// line with them.
//
// Invariant (AgentStore's, after every operation it completes): a block's
// refs = the number of agents, usable or not, whose blocks name it
// (RecountRefs restores it after agents change).
//
// Thread safety: none; AgentStore guards its index with its mutex. Namespace
// pointers stay valid until Clear() (std::map nodes).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "store/agent_record.h"

namespace agentkv {

// What the store knows of an agent from its manifest and its loads: kept per
// agent in the index (StoreIndex::Agent) and handed out in AgentSummary.
struct AgentFacts {
  uint32_t n_tokens = 0;
  uint64_t text_bytes = 0;
  uint64_t manifest_bytes = 0;
  std::string kv_types;
  uint32_t layout_version = 0;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t last_used_ms = 0;       // max(updated, last load) in this process
  uint64_t version = 0;           // its manifest's (AgentRecord::version)
  bool usable = true;             // false: kv types differ from the store's
};

struct AgentSummary : AgentFacts {
  std::string ns;
  std::string agent_id;
  uint32_t n_blocks = 0;
  uint32_t n_blocks_on_disk = 0;  // blocks whose file is present (not verified)
  uint64_t block_bytes = 0;       // all its blocks, shared ones included
};

class StoreIndex {
 public:
  struct Block {
    uint64_t file_bytes = 0;
    uint64_t checksum = 0;
    uint32_t refs = 0;
    bool durable = false;  // its directory entry was fsynced
  };
  struct Agent : AgentFacts {
    std::vector<BlockRef> blocks;
  };
  struct Namespace {
    std::string name;
    std::string dir;  // <root>/<NameHash(name)>
    std::map<std::string, Agent> agents;  // by agent id
    std::map<std::string, Block> blocks;  // block files on disk, by id
    bool dirs_ready = false;
    bool dirty = false;
    int writes_in_flight = 0;  // a save writing block files without the lock: a rescan keeps temp/orphan files
  };
  struct Totals {
    uint64_t agents = 0;
    uint64_t block_files = 0;
    uint64_t disk_bytes = 0;  // manifests + block files
  };

  // nullptr if unknown.
  Namespace* Find(std::string_view name);
  // The namespace, added (empty, with its name and dir) if unknown.
  Namespace& FindOrAdd(const std::string& name, const std::string& dir);
  // Replaces the picture: the namespaces of a full scan, by name.
  void Reset(std::vector<Namespace> scanned);
  // Every namespace, in name order.
  std::vector<Namespace*> All();
  // Names of the namespaces that hold at least one agent, sorted.
  std::vector<std::string> NamesWithAgents() const;
  Totals totals() const;

  // The least recently used agent other than keep_id of keep_ns (keep_ns
  // nullptr: none kept); false if there is none. *total_bytes (if given): the
  // manifests' and block files' bytes of every namespace searched. only_ns
  // (if given): that namespace alone, for both the victim and the total.
  bool PickLruVictim(const Namespace* keep_ns, std::string_view keep_id, Namespace** victim_ns,
                     std::string* victim_id, uint64_t* total_bytes, const Namespace* only_ns = nullptr);

  // Sets every block's refs from the agents that name it.
  static void RecountRefs(Namespace* ns);
  // The state an agent's manifest gives (last used = updated); `usable`:
  // whether its kv types are the store's.
  static Agent AgentOfManifest(const AgentRecord& rec, uint64_t manifest_bytes, bool usable);
  static AgentSummary Summary(const Namespace& ns, const std::string& id, const Agent& a);

 private:
  std::map<std::string, Namespace> namespaces_;  // by name
};

}  // namespace agentkv
