#include "remote/redis_remote_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <csignal>
#include <thread>

#include "store/file_system.h"
#include "store/store_ids.h"

namespace agentkv {
namespace {

// KEYS[1] = manifest key, ARGV[1] = version (unsigned decimal), ARGV[2] = bytes.
// Decimal strings without leading zeros compare as numbers by (length, text),
// exact for all 64-bit versions (Lua numbers are doubles).
constexpr const char* kManifestCasScript = R"lua(
local cur = redis.call('HGET', KEYS[1], 'v')
local v = ARGV[1]
if cur and (#cur > #v or (#cur == #v and cur >= v)) then return 0 end
redis.call('HSET', KEYS[1], 'v', v, 'm', ARGV[2])
return 1
)lua";

// Block claims (docs/remote.md, "Deletes"). KEYS[1] = the agent's block set
// ("<scope>a:<agent hash>"), ARGV[1] = the scope prefix, ARGV[2] = the agent
// hash, ARGV[3..] = block ids; each block's claimants are "<scope>r:<id>".
// (The r: and b: keys are built in the script: fine on one Redis, which is
// what docs/remote.md supports; a cluster would need hash tags.)
constexpr const char* kClaimScript = R"lua(
for i = 3, #ARGV do
  redis.call('SADD', KEYS[1], ARGV[i])
  redis.call('SADD', ARGV[1] .. 'r:' .. ARGV[i], ARGV[2])
end
return 1
)lua";

// KEYS[1] = the agent's block set, KEYS[2] = its manifest key; ARGV[1] =
// scope prefix, ARGV[2] = agent hash, ARGV[3] = the version the manifest must
// have ("0": any, or none), ARGV[4..] = the block ids to keep. Returns the
// number of blocks deleted, -1 if the manifest's version differs.
constexpr const char* kReleaseScript = R"lua(
if ARGV[3] ~= '0' and redis.call('HGET', KEYS[2], 'v') ~= ARGV[3] then return -1 end
local keep = {}
for i = 4, #ARGV do keep[ARGV[i]] = true end
local deleted = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not keep[id] then
    local refs = ARGV[1] .. 'r:' .. id
    redis.call('SREM', refs, ARGV[2])
    redis.call('SREM', KEYS[1], id)
    if redis.call('SCARD', refs) == 0 then
      deleted = deleted + redis.call('DEL', ARGV[1] .. 'b:' .. id)
    end
  end
end
return deleted
)lua";

timeval Tv(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

std::string ReplyText(const redisReply* r) { return std::string(r->str, r->len); }

Result<uint64_t> ParseVersion(const std::string& s) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) {
    return Status::Corruption("remote manifest: bad version '" + s.substr(0, 24) + "'");
  }
  return std::strtoull(s.c_str(), nullptr, 10);
}

}  // namespace

void RedisRemoteStore::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }

RedisRemoteStore::RedisRemoteStore(RedisOptions options) : options_(std::move(options)) {
  // hiredis writes with write(2): a Redis that went away must cost an error,
  // not the process (agentkv serve ignores SIGPIPE already; tools and tests
  // get the same here).
  std::signal(SIGPIPE, SIG_IGN);
}
RedisRemoteStore::~RedisRemoteStore() = default;

std::string RedisRemoteStore::Describe() const { return DescribeRedis(options_); }

std::string RedisRemoteStore::ScopePrefix(const RemoteScope& scope) {
  return "agentkv:v1:" + scope.fingerprint + ":" + NameHash(scope.ns) + ":";
}
std::string RedisRemoteStore::BlockKey(const RemoteScope& scope, std::string_view block_id) {
  return ScopePrefix(scope) + "b:" + std::string(block_id);
}
std::string RedisRemoteStore::AgentBlocksKey(const RemoteScope& scope, std::string_view agent_id) {
  return ScopePrefix(scope) + "a:" + NameHash(agent_id);
}

std::string RedisRemoteStore::ManifestKey(const RemoteScope& scope, std::string_view agent_id) {
  return ScopePrefix(scope) + "m:" + NameHash(agent_id);
}

Result<RedisRemoteStore::ContextPtr> RedisRemoteStore::Dial() {
  const std::string where = "remote " + Describe();
  ContextPtr c(redisConnectWithTimeout(options_.host.c_str(), options_.port, Tv(options_.connect_timeout_ms)));
  if (c == nullptr) return Status::Unavailable(where + ": cannot allocate a connection");
  if (c->err != 0) return Status::Unavailable(where + ": connect: " + c->errstr);
  if (redisSetTimeout(c.get(), Tv(options_.command_timeout_ms)) != REDIS_OK) {
    return Status::Unavailable(where + ": cannot set the timeout");
  }
  auto run = [&](std::vector<std::string> argv) -> Status {
    std::vector<const char*> p;
    std::vector<size_t> n;
    for (const auto& a : argv) {
      p.push_back(a.data());
      n.push_back(a.size());
    }
    ReplyPtr r(static_cast<redisReply*>(redisCommandArgv(c.get(), static_cast<int>(p.size()), p.data(), n.data())));
    if (r == nullptr) return Status::Unavailable(where + ": " + c->errstr);
    if (r->type == REDIS_REPLY_ERROR) return Status::FailedPrecondition(where + ": " + argv[0] + ": " + ReplyText(r.get()));
    return Status::OK();
  };
  if (!options_.password.empty()) {
    if (options_.user.empty()) {
      AGENTKV_RETURN_IF_ERROR(run({"AUTH", options_.password}));
    } else {
      AGENTKV_RETURN_IF_ERROR(run({"AUTH", options_.user, options_.password}));
    }
  }
  if (options_.db != 0) AGENTKV_RETURN_IF_ERROR(run({"SELECT", std::to_string(options_.db)}));
  return c;
}

Result<RedisRemoteStore::ContextPtr> RedisRemoteStore::Acquire() {
  {
    MutexLock lock(&mu_);
    if (!idle_.empty()) {
      ContextPtr c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
    if (std::chrono::steady_clock::now() < down_until_) {
      return Status::Unavailable(last_error_ + " (not retried for " + std::to_string(options_.retry_after_ms) + " ms)");
    }
  }
  auto c = Dial();
  if (!c.ok()) {
    MutexLock lock(&mu_);
    down_until_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.retry_after_ms);
    last_error_ = c.status().message();
  }
  return c;
}

void RedisRemoteStore::Release(ContextPtr c, bool healthy) {
  if (!healthy || c == nullptr || c->err != 0) return;  // dropped: the next call dials anew
  MutexLock lock(&mu_);
  idle_.push_back(std::move(c));
}

Status RedisRemoteStore::Ping() {
  {
    MutexLock lock(&mu_);
    down_until_ = {};
  }
  auto r = Pipeline<bool>({{"PING"}}, [](redisReply*) -> Result<bool> { return true; });
  return r.status();
}

template <typename T, typename Take>
Result<std::vector<T>> RedisRemoteStore::Pipeline(const std::vector<std::vector<std::string_view>>& argvs, Take take) {
  // A network round trip: held to the disk's thread rule (never on the
  // inference thread; docs/architecture.md).
  NoteFileAccess("redis", argvs.empty() ? "" : std::string(argvs[0][0]));
  AGENTKV_ASSIGN_OR_RETURN(ContextPtr c, Acquire());
  const std::string where = "remote " + Describe();
  for (const auto& argv : argvs) {
    std::vector<const char*> p;
    std::vector<size_t> n;
    for (const auto& a : argv) {
      p.push_back(a.data());
      n.push_back(a.size());
    }
    if (redisAppendCommandArgv(c.get(), static_cast<int>(p.size()), p.data(), n.data()) != REDIS_OK) {
      Status s = Status::Unavailable(where + ": " + c->errstr);
      Release(std::move(c), false);
      return s;
    }
  }
  std::vector<T> out;
  out.reserve(argvs.size());
  Status first_error;
  for (size_t i = 0; i < argvs.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c.get(), &raw) != REDIS_OK || raw == nullptr) {
      Status s = Status::Unavailable(where + ": " + (c->errstr[0] ? c->errstr : "connection lost"));
      Release(std::move(c), false);
      return s;
    }
    ReplyPtr r(static_cast<redisReply*>(raw));
    if (!first_error.ok()) continue;  // drain the remaining replies
    if (r->type == REDIS_REPLY_ERROR) {
      first_error = Status::IOError(where + ": " + std::string(argvs[i][0]) + ": " + ReplyText(r.get()));
      continue;
    }
    auto v = take(r.get());
    if (!v.ok()) {
      first_error = v.status();
      continue;
    }
    out.push_back(std::move(v).value());
  }
  Release(std::move(c), true);
  if (!first_error.ok()) return first_error;
  return out;
}

Result<std::vector<bool>> RedisRemoteStore::BlocksExist(const RemoteScope& scope, std::span<const std::string> ids) {
  std::vector<std::string> keys;
  for (const auto& id : ids) keys.push_back(BlockKey(scope, id));
  std::vector<std::vector<std::string_view>> argvs;
  for (const auto& k : keys) argvs.push_back({"EXISTS", k});
  auto r = Pipeline<char>(argvs, [](redisReply* r) -> Result<char> {
    if (r->type != REDIS_REPLY_INTEGER) return Status::IOError("remote: EXISTS: unexpected reply");
    return static_cast<char>(r->integer != 0);
  });
  if (!r.ok()) return r.status();
  return std::vector<bool>(r->begin(), r->end());
}

Result<std::vector<std::optional<std::string>>> RedisRemoteStore::GetBlocks(const RemoteScope& scope,
                                                                           std::span<const std::string> ids) {
  using Value = std::optional<std::string>;
  auto get_range = [&](size_t begin, size_t end) -> Result<std::vector<Value>> {
    std::vector<std::string> keys;
    for (size_t i = begin; i < end; ++i) keys.push_back(BlockKey(scope, ids[i]));
    std::vector<std::vector<std::string_view>> argvs;
    for (const auto& k : keys) argvs.push_back({"GET", k});
    return Pipeline<Value>(argvs, [](redisReply* r) -> Result<Value> {
      if (r->type == REDIS_REPLY_NIL) return Value{};
      if (r->type != REDIS_REPLY_STRING) return Status::IOError("remote: GET: unexpected reply");
      return Value{ReplyText(r)};
    });
  };
  const size_t n = ids.size();
  const size_t parts = std::clamp<size_t>(n, 1, static_cast<size_t>(std::max(1, options_.parallel_reads)));
  if (parts <= 1) return get_range(0, n);
  std::vector<std::optional<Result<std::vector<Value>>>> results(parts);
  std::vector<std::thread> threads;
  auto bound = [&](size_t p) { return n * p / parts; };
  for (size_t p = 1; p < parts; ++p) {
    threads.emplace_back([&, p] { results[p] = get_range(bound(p), bound(p + 1)); });
  }
  results[0] = get_range(0, bound(1));
  for (auto& t : threads) t.join();
  std::vector<Value> out;
  out.reserve(n);
  for (auto& r : results) {
    if (!r->ok()) return r->status();
    for (auto& v : r->value()) out.push_back(std::move(v));
  }
  return out;
}

Result<uint32_t> RedisRemoteStore::PutBlocksIfAbsent(const RemoteScope& scope,
                                                     std::span<const std::pair<std::string, std::string_view>> blocks) {
  if (blocks.empty()) return 0u;
  std::vector<std::string> keys;
  for (const auto& b : blocks) keys.push_back(BlockKey(scope, b.first));
  std::vector<std::vector<std::string_view>> argvs;
  for (size_t i = 0; i < blocks.size(); ++i) argvs.push_back({"SET", keys[i], blocks[i].second, "NX"});
  auto r = Pipeline<char>(argvs, [](redisReply* r) -> Result<char> {
    return static_cast<char>(r->type == REDIS_REPLY_STATUS);  // OK: written; nil: was present
  });
  if (!r.ok()) return r.status();
  return static_cast<uint32_t>(std::count(r->begin(), r->end(), 1));
}

Status RedisRemoteStore::DeleteBlocks(const RemoteScope& scope, std::span<const std::string> ids) {
  if (ids.empty()) return Status::OK();
  std::vector<std::string> keys;
  for (const auto& id : ids) keys.push_back(BlockKey(scope, id));
  std::vector<std::string_view> argv{"DEL"};
  for (const auto& k : keys) argv.push_back(k);
  return Pipeline<char>({argv}, [](redisReply*) -> Result<char> { return char{1}; }).status();
}

Status RedisRemoteStore::ClaimBlocks(const RemoteScope& scope, std::string_view agent_id,
                                     std::span<const std::string> ids) {
  if (ids.empty()) return Status::OK();
  const std::string key = AgentBlocksKey(scope, agent_id), prefix = ScopePrefix(scope), agent = NameHash(agent_id);
  std::vector<std::string_view> argv{"EVAL", kClaimScript, "1", key, prefix, agent};
  for (const auto& id : ids) argv.push_back(id);
  return Pipeline<char>({argv}, [](redisReply*) -> Result<char> { return char{1}; }).status();
}

Result<uint32_t> RedisRemoteStore::ReleaseBlocks(const RemoteScope& scope, std::string_view agent_id,
                                                 std::span<const std::string> keep, uint64_t if_version) {
  const std::string key = AgentBlocksKey(scope, agent_id), manifest = ManifestKey(scope, agent_id);
  const std::string prefix = ScopePrefix(scope), agent = NameHash(agent_id), v = std::to_string(if_version);
  std::vector<std::string_view> argv{"EVAL", kReleaseScript, "2", key, manifest, prefix, agent, v};
  for (const auto& id : keep) argv.push_back(id);
  auto r = Pipeline<uint32_t>({argv}, [](redisReply* r) -> Result<uint32_t> {
    if (r->type != REDIS_REPLY_INTEGER) return Status::IOError("remote: release blocks: unexpected reply");
    return static_cast<uint32_t>(std::max<long long>(0, r->integer));
  });
  if (!r.ok()) return r.status();
  return r->front();
}

Result<std::optional<RemoteManifest>> RedisRemoteStore::GetManifest(const RemoteScope& scope,
                                                                    std::string_view agent_id) {
  const std::string key = ManifestKey(scope, agent_id);
  using Value = std::optional<RemoteManifest>;
  auto r = Pipeline<Value>({{"HMGET", key, "v", "m"}}, [](redisReply* r) -> Result<Value> {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return Status::IOError("remote: HMGET: unexpected reply");
    const redisReply* v = r->element[0];
    const redisReply* m = r->element[1];
    if (v->type == REDIS_REPLY_NIL && m->type == REDIS_REPLY_NIL) return Value{};
    if (v->type != REDIS_REPLY_STRING || m->type != REDIS_REPLY_STRING) {
      return Status::Corruption("remote manifest: incomplete entry");
    }
    AGENTKV_ASSIGN_OR_RETURN(uint64_t version, ParseVersion(ReplyText(v)));
    return Value{RemoteManifest{version, ReplyText(m)}};
  });
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

Result<bool> RedisRemoteStore::PutManifestIfNewer(const RemoteScope& scope, std::string_view agent_id,
                                                  uint64_t version, std::string_view bytes) {
  const std::string key = ManifestKey(scope, agent_id);
  const std::string v = std::to_string(version);
  auto r = Pipeline<char>({{"EVAL", kManifestCasScript, "1", key, v, bytes}}, [](redisReply* r) -> Result<char> {
    if (r->type != REDIS_REPLY_INTEGER) return Status::IOError("remote: manifest CAS: unexpected reply");
    return static_cast<char>(r->integer == 1);
  });
  if (!r.ok()) return r.status();
  return r->front() == 1;
}

Status RedisRemoteStore::DeleteManifest(const RemoteScope& scope, std::string_view agent_id) {
  const std::string key = ManifestKey(scope, agent_id);
  return Pipeline<char>({{"DEL", key}}, [](redisReply*) -> Result<char> { return char{1}; }).status();
}

Result<std::vector<RemoteManifest>> RedisRemoteStore::ListManifests(const RemoteScope& scope) {
  const std::string pattern = "agentkv:v1:" + (scope.fingerprint.empty() ? "*" : scope.fingerprint) + ":" +
                              (scope.ns.empty() ? "*" : NameHash(scope.ns)) + ":m:*";
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    auto r = Pipeline<std::string>({{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}},
                                   [&keys](redisReply* r) -> Result<std::string> {
                                     if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
                                       return Status::IOError("remote: SCAN: unexpected reply");
                                     }
                                     for (size_t i = 0; i < r->element[1]->elements; ++i) {
                                       keys.push_back(ReplyText(r->element[1]->element[i]));
                                     }
                                     return ReplyText(r->element[0]);
                                   });
    if (!r.ok()) return r.status();
    cursor = r->front();
  } while (cursor != "0");
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<std::vector<std::string_view>> argvs;
  for (const auto& k : keys) argvs.push_back({"HMGET", k, "v", "m"});
  using Value = std::optional<RemoteManifest>;
  auto r = Pipeline<Value>(argvs, [](redisReply* r) -> Result<Value> {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return Status::IOError("remote: HMGET: unexpected reply");
    if (r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) return Value{};
    auto v = ParseVersion(ReplyText(r->element[0]));
    if (!v.ok()) return Value{};
    return Value{RemoteManifest{*v, ReplyText(r->element[1])}};
  });
  if (!r.ok()) return r.status();
  std::vector<RemoteManifest> out;
  for (auto& m : *r) {
    if (m) out.push_back(std::move(*m));
  }
  return out;
}

}  // namespace agentkv
