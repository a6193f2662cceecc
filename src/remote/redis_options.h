#pragma once
// Where the Redis remote tier lives and how to log in: parsed from
// `--remote redis://[user:pass@]host[:port][/db]` (AGENTKV_REMOTE), the
// password optionally from a file or AGENTKV_REMOTE_PASSWORD instead of the
// URL (docs/remote.md). Pure functions.

#include <string>

#include "util/status.h"

namespace agentkv {

struct RedisOptions {
  std::string host;
  int port = 6379;
  int db = 0;
  std::string user;      // "" : AUTH <password> (Redis < 6 style / default user)
  std::string password;  // "" : no AUTH
  int connect_timeout_ms = 500;
  int command_timeout_ms = 2000;
  int parallel_reads = 4;      // connections one GetBlocks spreads its GETs over
  int retry_after_ms = 1000;   // after a failed connect, calls fail fast for this long
};

// Parses redis://[[user]:password@]host[:port][/db]; %XX escapes in user and
// password are decoded. InvalidArgument("remote url: ...") otherwise.
Result<RedisOptions> ParseRedisUrl(const std::string& url);

// Fills options->password from `password_file` (its first line) if non-empty,
// else from $AGENTKV_REMOTE_PASSWORD if set; a password in the URL is kept
// otherwise. InvalidArgument if the file cannot be read.
Status LoadRedisPassword(const std::string& password_file, RedisOptions* options);

// "redis://host:port/db" (no credentials), for logs.
std::string DescribeRedis(const RedisOptions& options);

}  // namespace agentkv
