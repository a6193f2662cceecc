#include "store/store_index.h"

#include <utility>

namespace agentkv {

StoreIndex::Namespace* StoreIndex::Find(std::string_view name) {
  auto it = namespaces_.find(std::string(name));
  return it == namespaces_.end() ? nullptr : &it->second;
}

StoreIndex::Namespace& StoreIndex::FindOrAdd(const std::string& name, const std::string& dir) {
  auto [it, added] = namespaces_.try_emplace(name);
  if (added) {
    it->second.name = name;
    it->second.dir = dir;
  }
  return it->second;
}

void StoreIndex::Reset(std::vector<Namespace> scanned) {
  namespaces_.clear();
  for (Namespace& ns : scanned) {
    std::string name = ns.name;
    namespaces_[name] = std::move(ns);
  }
}

std::vector<StoreIndex::Namespace*> StoreIndex::All() {
  std::vector<Namespace*> out;
  out.reserve(namespaces_.size());
  for (auto& [name, ns] : namespaces_) out.push_back(&ns);
  return out;
}

std::vector<std::string> StoreIndex::NamesWithAgents() const {
  std::vector<std::string> out;
  for (const auto& [name, ns] : namespaces_) {
    if (!ns.agents.empty()) out.push_back(name);
  }
  return out;
}

StoreIndex::Totals StoreIndex::totals() const {
  Totals t;
  for (const auto& [name, ns] : namespaces_) {
    t.agents += ns.agents.size();
    t.block_files += ns.blocks.size();
    for (const auto& [id, b] : ns.blocks) t.disk_bytes += b.file_bytes;
    for (const auto& [id, a] : ns.agents) t.disk_bytes += a.manifest_bytes;
  }
  return t;
}

bool StoreIndex::PickLruVictim(const Namespace* keep_ns, std::string_view keep_id, Namespace** victim_ns,
                               std::string* victim_id, uint64_t* total_bytes, const Namespace* only_ns) {
  const std::string* victim = nullptr;
  int64_t oldest = 0;
  uint64_t total = 0;
  for (auto& [name, ns] : namespaces_) {
    if (only_ns != nullptr && &ns != only_ns) continue;
    for (const auto& [id, b] : ns.blocks) total += b.file_bytes;
    for (const auto& [id, a] : ns.agents) {
      total += a.manifest_bytes;
      if (&ns == keep_ns && id == keep_id) continue;
      if (victim == nullptr || a.last_used_ms < oldest) {
        *victim_ns = &ns;
        victim = &id;
        oldest = a.last_used_ms;
      }
    }
  }
  if (total_bytes != nullptr) *total_bytes = total;
  if (victim == nullptr) return false;
  *victim_id = *victim;
  return true;
}

void StoreIndex::RecountRefs(Namespace* ns) {
  for (auto& [id, b] : ns->blocks) b.refs = 0;
  for (const auto& [agent_id, a] : ns->agents) {
    for (const BlockRef& ref : a.blocks) {
      auto it = ns->blocks.find(ref.id);
      if (it != ns->blocks.end()) ++it->second.refs;
    }
  }
}

StoreIndex::Agent StoreIndex::AgentOfManifest(const AgentRecord& rec, uint64_t manifest_bytes, bool usable) {
  Agent a;
  a.blocks = rec.blocks;
  a.n_tokens = static_cast<uint32_t>(rec.tokens.size());
  a.text_bytes = rec.text.size();
  a.manifest_bytes = manifest_bytes;
  a.kv_types = rec.kv_types;
  a.layout_version = rec.layout_version;
  a.created_ms = rec.created_ms;
  a.updated_ms = rec.updated_ms;
  a.last_used_ms = rec.updated_ms;
  a.version = rec.version;
  a.usable = usable;
  return a;
}

AgentSummary StoreIndex::Summary(const Namespace& ns, const std::string& id, const Agent& a) {
  AgentSummary s;
  static_cast<AgentFacts&>(s) = a;
  s.ns = ns.name;
  s.agent_id = id;
  s.n_blocks = static_cast<uint32_t>(a.blocks.size());
  for (const BlockRef& b : a.blocks) {
    s.block_bytes += b.file_bytes;
    if (ns.blocks.count(b.id)) ++s.n_blocks_on_disk;
  }
  return s;
}

}  // namespace agentkv
