#include "sched/agent_admin.h"

#include <algorithm>
#include <set>

#include "store/store_ids.h"

namespace agentkv::sched {
namespace {

// An agent the table dropped (AgentTable::Trim): known from its manifest only.
api::AgentInfo InfoFromSummary(const AgentSummary& s) {
  api::AgentInfo info;
  info.id = s.agent_id;
  info.tokens = s.n_tokens;
  info.last_used_unix_ms = s.last_used_ms;
  info.tier = api::CacheState::kWarm;
  return info;
}

}  // namespace

AgentAdmin::AgentAdmin(AgentTiers& tiers, uint64_t slot_bytes_per_token, RunOnLoop run_on_loop, LeaveSlot leave_slot)
    : tiers_(tiers), slot_bytes_per_token_(slot_bytes_per_token), run_on_loop_(std::move(run_on_loop)),
      leave_slot_(std::move(leave_slot)) {}

Result<std::vector<api::AgentInfo>> AgentAdmin::List(const std::string& ns) {
  tiers_.ReadNamespaceIndex(ns);
  std::vector<api::AgentInfo> out;
  bool trimmed = false;
  run_on_loop_([&] {
    tiers_.MergeNamespaceIndex(ns);
    trimmed = tiers_.table().Trimmed(ns);
    tiers_.table().ForEachIn(ns, [&](const Agent& a) { out.push_back(tiers_.InfoOf(a, slot_bytes_per_token_)); });
  });
  if (trimmed) {  // the agents the table dropped are on disk
    std::set<std::string> listed;
    for (const auto& info : out) listed.insert(info.id);
    for (const auto& s : tiers_.DiskAgents(ns)) {
      if (!listed.count(s.agent_id)) out.push_back(InfoFromSummary(s));
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  }
  for (auto& info : out) tiers_.FillDiskBytes(ns, &info);
  return out;
}

Result<api::AgentInfo> AgentAdmin::Get(const std::string& ns, const std::string& agent_id) {
  tiers_.ReadNamespaceIndex(ns);
  Result<api::AgentInfo> out = Status::NotFound("agent '" + agent_id + "' not found");
  bool trimmed = false;
  run_on_loop_([&] {
    tiers_.MergeNamespaceIndex(ns);
    trimmed = tiers_.table().Trimmed(ns);
    if (Agent* a = tiers_.table().Find({ns, agent_id})) out = tiers_.InfoOf(*a, slot_bytes_per_token_);
  });
  if (!out.ok() && trimmed) {
    if (auto s = tiers_.DiskAgent({ns, agent_id}); s && s->usable) out = InfoFromSummary(*s);
  }
  if (out.ok()) tiers_.FillDiskBytes(ns, &*out);
  return out;
}

Status AgentAdmin::Delete(const std::string& ns, const std::string& agent_id, bool evict_only) {
  AGENTKV_RETURN_IF_ERROR(ValidateName("agent id", agent_id));
  tiers_.ReadNamespaceIndex(ns);
  const AgentKey key{ns, agent_id};
  Status result;
  bool erase_disk = false;
  bool only_on_disk = false;  // dropped from the table: its manifest decides whether it exists
  run_on_loop_([&] {
    tiers_.MergeNamespaceIndex(ns);
    AgentTable& table = tiers_.table();
    Agent* a = table.Find(key);
    if (a == nullptr && table.Trimmed(ns) && tiers_.has_store()) {
      only_on_disk = true;
      if (evict_only) return;  // nothing of it is in a slot or RAM
    } else if (a == nullptr) {
      result = Status::NotFound("agent '" + agent_id + "' not found");
      return;
    } else if (a->busy) {
      result = Status::FailedPrecondition("agent '" + agent_id + "' has a request in flight");
      return;
    } else if (a->slot >= 0) {
      leave_slot_(*a);
    }
    if (evict_only) return;
    erase_disk = only_on_disk || a->on_disk;
    tiers_.BeginErase(key);
    table.Erase(key);
  });
  if (!result.ok()) return result;
  if (only_on_disk && evict_only) {  // nothing to evict; does it exist?
    return tiers_.DiskAgent(key) ? Status::OK() : Status::NotFound("agent '" + agent_id + "' not found");
  }
  if (evict_only) return tiers_.EvictToDisk(key);
  return tiers_.EraseStored(key, erase_disk, only_on_disk);
}

}  // namespace agentkv::sched
