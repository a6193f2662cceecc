// agentkv cache ls|show|verify|rm: the disk tier without a model loaded.
#include <cstdio>
#include <ctime>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/server_stack.h"
#include "remote/redis_remote_store.h"
#include "remote/remote_admin.h"
#include "store/cache_admin.h"

namespace agentkv::cli {
namespace {

constexpr const char* kUsage =
    "usage: agentkv cache ls|show|verify|rm [--cache-dir DIR] [--namespace NS] [AGENT] [--repair]\n"
    "       agentkv cache ls|show|verify --remote redis://... [--remote-password-file F] [--namespace NS] [AGENT]\n"
    "  ls      agents with tokens, blocks, bytes, last use (all model fingerprints)\n"
    "  show    one agent's record (text preview, blocks)\n"
    "  verify  read and checksum every block (--repair quarantines bad files)\n"
    "  rm      erase an agent's manifest and unshared blocks\n"
    "ls/show/verify read a server's live cache read-only; rm and verify --repair\n"
    "refuse while a server holds the cache dir's LOCK.\n"
    "--remote reads the remote tier instead (docs/remote.md), read-only; bad blocks are reported, not removed.\n"
    "Default cache dir: $AGENTKV_CACHE_DIR or ~/.cache/agentkv/kv.\n";

std::string Time(int64_t ms) {
  if (ms <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
  return buf;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "agentkv cache: %s\n", s.ToString().c_str());
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

void PrintVerify(const VerifyReport& r) {
  std::printf("%-16s %-24s %s  blocks %u ok / %u missing / %u corrupt, valid prefix %u of %u tokens\n",
              r.ns.c_str(), r.agent_id.c_str(), r.ok() ? "OK " : "BAD", r.n_ok, r.n_missing, r.n_corrupt,
              r.valid_tokens, r.n_tokens);
  for (const auto& p : r.problems) std::printf("    %s\n", p.c_str());
}

void PrintRecord(const AgentRecord& r, const std::string& fingerprint) {
  std::printf("agent %s (namespace %s, model %s)\n  tokens %zu, blocks %zu, kv %s, layout v%u\n"
              "  created %s, updated %s, version %llu\n",
              r.agent_id.c_str(), r.ns.c_str(), fingerprint.c_str(), r.tokens.size(), r.blocks.size(),
              r.kv_types.c_str(), r.layout_version, Time(r.created_ms).c_str(), Time(r.updated_ms).c_str(),
              static_cast<unsigned long long>(r.version));
  for (size_t i = 0; i < r.blocks.size(); ++i) {
    std::printf("  block %zu  %s  %u tokens  %llu bytes\n", i, r.blocks[i].id.c_str(), r.blocks[i].n_tokens,
                static_cast<unsigned long long>(r.blocks[i].file_bytes));
  }
  const std::string preview = r.text.size() > 400 ? r.text.substr(r.text.size() - 400) : r.text;
  std::printf("  text (%zu bytes, last 400):\n%s\n", r.text.size(), preview.c_str());
}

// cache ls|show|verify --remote: read-only.
int RemoteCache(const std::string& verb, const std::string& url, const std::string& password_file, bool repair,
                const CacheQuery& q) {
  if (verb != "ls" && verb != "show" && verb != "verify") {
    std::fprintf(stderr, "agentkv cache %s: not with --remote (erase agents with DELETE /v1/agents/ID)\n",
                 verb.c_str());
    return 2;
  }
  if (repair) {
    std::fprintf(stderr, "agentkv cache verify --remote: --repair is not supported (servers drop bad remote "
                 "blocks they fetch)\n");
    return 2;
  }
  auto options = ParseRedisUrl(url);
  if (!options.ok()) return Fail(options.status());
  if (Status s = LoadRedisPassword(password_file, &*options); !s.ok()) return Fail(s);
  RedisRemoteStore store(*options);
  if (verb == "verify") {
    auto reports = RemoteCacheVerify(&store, q.ns, q.agent_id);
    if (!reports.ok()) return Fail(reports.status());
    int bad = 0;
    for (const auto& r : *reports) {
      PrintVerify(r);
      bad += r.ok() ? 0 : 1;
    }
    return bad == 0 ? 0 : 1;
  }
  auto listing = RemoteCacheList(&store, q.ns, q.agent_id);
  if (!listing.ok()) return Fail(listing.status());
  for (const auto& p : listing->problems) std::fprintf(stderr, "agentkv cache: bad remote %s\n", p.c_str());
  if (verb == "show") {
    if (listing->agents.empty()) return Fail(Status::NotFound("agent '" + q.agent_id + "' not in " + store.Describe()));
    for (const auto& row : listing->agents) PrintRecord(row.record, row.record.fingerprint);
    return 0;
  }
  std::printf("%-18s %-16s %-24s %8s %7s %12s %-12s %s\n", "fingerprint", "namespace", "agent", "tokens", "blocks",
              "bytes", "kv", "updated (UTC)");
  for (const auto& row : listing->agents) {
    const AgentRecord& r = row.record;
    uint64_t bytes = 0;
    for (const auto& b : r.blocks) bytes += b.file_bytes;
    std::printf("%-18s %-16s %-24s %8zu %7zu %12llu %-12s %s\n", r.fingerprint.substr(0, 16).c_str(), r.ns.c_str(),
                r.agent_id.c_str(), r.tokens.size(), r.blocks.size(), static_cast<unsigned long long>(bytes),
                r.kv_types.c_str(), Time(r.updated_ms).c_str());
  }
  return 0;
}

}  // namespace

int CmdCache(int argc, char** argv) {
  Flags flags(argc, argv, {"help", "repair"});
  const auto& pos = flags.positional();
  if (flags.Has("help") || pos.empty()) {
    std::fputs(kUsage, flags.Has("help") ? stdout : stderr);
    return flags.Has("help") ? 0 : 2;
  }
  if (!flags.error().empty()) {
    std::fprintf(stderr, "agentkv cache: %s\n%s", flags.error().c_str(), kUsage);
    return 2;
  }
  if (auto unknown = flags.Unknown({"cache-dir", "namespace", "repair", "remote", "remote-password-file", "help"});
      !unknown.empty()) {
    std::fprintf(stderr, "agentkv cache: unknown flag --%s\n%s", unknown[0].c_str(), kUsage);
    return 2;
  }
  const std::string verb = pos[0];
  CacheQuery q;
  q.cache_dir = flags.GetOr("cache-dir", "", DefaultCacheDir());
  q.ns = flags.GetOr("namespace", "", "");
  if (pos.size() > 1) q.agent_id = pos[1];
  if ((verb == "show" || verb == "rm") && q.agent_id.empty()) {
    std::fprintf(stderr, "agentkv cache %s: AGENT is required\n", verb.c_str());
    return 2;
  }
  if (auto url = flags.Get("remote"); url && !url->empty()) {
    return RemoteCache(verb, *url, flags.GetOr("remote-password-file", "", ""), flags.Has("repair"), q);
  }
  const bool writes = verb == "rm" || (verb == "verify" && flags.Has("repair"));
  if (!writes && (verb == "ls" || verb == "show" || verb == "verify")) {
    auto live = CacheInUse(nullptr, q.cache_dir);
    if (!live.ok()) return Fail(live.status());
    if (*live) {
      std::fprintf(stderr, "agentkv cache: note: a running server holds %s; reading its live cache read-only "
                   "(agents may change while this runs)\n", CacheLockPath(q.cache_dir).c_str());
    }
  }
  if (verb == "ls") {
    auto rows = CacheList(q);
    if (!rows.ok()) return Fail(rows.status());
    std::printf("%-18s %-16s %-24s %8s %7s %12s %-12s %s\n", "fingerprint", "namespace", "agent", "tokens", "blocks",
                "bytes", "kv", "last use (UTC)");
    for (const auto& r : *rows) {
      const auto& s = r.summary;
      std::printf("%-18s %-16s %-24s %8u %7u %12llu %-12s %s%s\n", r.fingerprint.substr(0, 16).c_str(), s.ns.c_str(),
                  s.agent_id.c_str(), s.n_tokens, s.n_blocks, static_cast<unsigned long long>(s.block_bytes),
                  s.kv_types.c_str(), Time(s.last_used_ms).c_str(), s.usable ? "" : "  (other kv types)");
    }
    return 0;
  }
  if (verb == "show") {
    auto rows = CacheShow(q);
    if (!rows.ok()) return Fail(rows.status());
    for (const auto& d : *rows) {
      PrintRecord(d.record, d.fingerprint);
    }
    return 0;
  }
  if (verb == "verify") {
    auto rows = CacheVerify(q, flags.Has("repair"));
    if (!rows.ok()) return Fail(rows.status());
    int bad = 0;
    for (const auto& v : *rows) {
      PrintVerify(v.report);
      bad += v.report.ok() ? 0 : 1;
    }
    return bad == 0 ? 0 : 1;
  }
  if (verb == "rm") {
    auto n = CacheRemove(q);
    if (!n.ok()) return Fail(n.status());
    std::printf("removed %zu agent(s)\n", *n);
    return 0;
  }
  std::fprintf(stderr, "agentkv cache: unknown verb '%s'\n%s", verb.c_str(), kUsage);
  return 2;
}

}  // namespace agentkv::cli
