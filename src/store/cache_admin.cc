#include "store/cache_admin.h"

#include <algorithm>
#include <functional>

#include "store/store_ids.h"

namespace agentkv {
namespace {

FileSystem* FsOf(const CacheQuery& q) { return q.fs ? q.fs : DefaultFileSystem(); }

Status CheckQuery(const CacheQuery& q, bool need_agent) {
  if (q.cache_dir.empty()) return Status::InvalidArgument("cache: empty cache dir");
  if (!q.ns.empty()) AGENTKV_RETURN_IF_ERROR(ValidateName("namespace", q.ns));
  if (need_agent || !q.agent_id.empty()) AGENTKV_RETURN_IF_ERROR(ValidateName("agent id", q.agent_id));
  return Status::OK();
}

// Writable verbs refuse a live cache here with a message naming the verb;
// the lock taken by AgentStore::Open is what really excludes the server.
Status RefuseIfLive(const CacheQuery& q, const char* verb, const char* instead) {
  AGENTKV_ASSIGN_OR_RETURN(bool live, CacheInUse(FsOf(q), q.cache_dir));
  if (!live) return Status::OK();
  return Status::FailedPrecondition(std::string(verb) + ": refused: a running agentkv server holds " +
                                    CacheLockPath(q.cache_dir) + "; stop it first, or " + instead);
}

// Calls fn(fingerprint, store, summary) for every agent matching q.
Status ForEachAgent(const CacheQuery& q, bool read_only,
                    const std::function<Status(const std::string&, AgentStore*, const AgentSummary&)>& fn) {
  AGENTKV_ASSIGN_OR_RETURN(std::vector<std::string> fps, ListCacheFingerprints(FsOf(q), q.cache_dir));
  for (const std::string& fp : fps) {
    AgentStoreOptions o;
    o.fs = FsOf(q);
    o.cache_dir = q.cache_dir;
    o.fingerprint = fp;
    o.read_only = read_only;
    AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<AgentStore> store, AgentStore::Open(std::move(o)));
    std::vector<std::string> namespaces = q.ns.empty() ? store->ListNamespaces() : std::vector<std::string>{q.ns};
    for (const std::string& ns : namespaces) {
      AGENTKV_ASSIGN_OR_RETURN(std::vector<AgentSummary> agents, store->ListAgents(ns));
      for (const AgentSummary& a : agents) {
        if (!q.agent_id.empty() && a.agent_id != q.agent_id) continue;
        AGENTKV_RETURN_IF_ERROR(fn(fp, store.get(), a));
      }
    }
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<std::string>> ListCacheFingerprints(FileSystem* fs, const std::string& cache_dir) {
  auto entries = fs->ListDir(cache_dir);
  if (!entries.ok()) return entries.status().WithContext("list cache");
  std::vector<std::string> out;
  for (const DirEntry& e : *entries) {
    if (e.is_dir && ValidateName("fingerprint", e.name).ok()) out.push_back(e.name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<bool> CacheInUse(FileSystem* fs, const std::string& cache_dir) {
  auto held = (fs ? fs : DefaultFileSystem())->IsLockHeld(CacheLockPath(cache_dir));
  if (!held.ok()) return held.status().WithContext("cache");
  return *held;
}

Result<std::vector<CacheAgentRow>> CacheList(const CacheQuery& q) {
  AGENTKV_RETURN_IF_ERROR(CheckQuery(q, false).WithContext("cache ls"));
  std::vector<CacheAgentRow> rows;
  AGENTKV_RETURN_IF_ERROR(ForEachAgent(q, true, [&](const std::string& fp, AgentStore*, const AgentSummary& a) {
    rows.push_back({fp, a});
    return Status::OK();
  }));
  return rows;
}

Result<std::vector<CacheAgentDetail>> CacheShow(const CacheQuery& q) {
  AGENTKV_RETURN_IF_ERROR(CheckQuery(q, true).WithContext("cache show"));
  std::vector<CacheAgentDetail> out;
  AGENTKV_RETURN_IF_ERROR(ForEachAgent(q, true, [&](const std::string& fp, AgentStore* s, const AgentSummary& a) {
    CacheAgentDetail d{fp, a, {}};
    if (a.usable) {
      AGENTKV_ASSIGN_OR_RETURN(d.record, s->GetRecord(a.ns, a.agent_id));
    }
    out.push_back(std::move(d));
    return Status::OK();
  }));
  if (out.empty()) return Status::NotFound("cache show: agent " + q.agent_id + " not found");
  return out;
}

Result<std::vector<CacheVerifyRow>> CacheVerify(const CacheQuery& q, bool repair) {
  AGENTKV_RETURN_IF_ERROR(CheckQuery(q, false).WithContext("cache verify"));
  if (repair) AGENTKV_RETURN_IF_ERROR(RefuseIfLive(q, "cache verify --repair", "run verify without --repair"));
  std::vector<CacheVerifyRow> out;
  AGENTKV_RETURN_IF_ERROR(
      ForEachAgent(q, !repair, [&](const std::string& fp, AgentStore* s, const AgentSummary& a) {
        AGENTKV_ASSIGN_OR_RETURN(VerifyReport r, s->VerifyAgent(a.ns, a.agent_id));
        out.push_back({fp, std::move(r)});
        return Status::OK();
      }));
  return out;
}

Result<size_t> CacheRemove(const CacheQuery& q) {
  AGENTKV_RETURN_IF_ERROR(CheckQuery(q, true).WithContext("cache rm"));
  AGENTKV_RETURN_IF_ERROR(RefuseIfLive(q, "cache rm", "erase through the server: DELETE /v1/agents/<id>"));
  size_t n = 0;
  AGENTKV_RETURN_IF_ERROR(ForEachAgent(q, false, [&](const std::string&, AgentStore* s, const AgentSummary& a) {
    AGENTKV_RETURN_IF_ERROR(s->DeleteAgent(a.ns, a.agent_id));
    ++n;
    return Status::OK();
  }));
  if (n == 0) return Status::NotFound("cache rm: agent " + q.agent_id + " not found");
  return n;
}

}  // namespace agentkv
