#include "remote/redis_options.h"

#include <cstdlib>
#include <fstream>

namespace agentkv {
namespace {

Result<std::string> PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    const std::string hex = s.substr(i + 1, 2);
    if (hex.size() != 2 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return Status::InvalidArgument("remote url: bad % escape");
    }
    out += static_cast<char>(std::strtol(hex.c_str(), nullptr, 16));
    i += 2;
  }
  return out;
}

bool ParseInt(const std::string& s, int lo, int hi, int* v) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  const long n = std::strtol(s.c_str(), nullptr, 10);
  if (n < lo || n > hi) return false;
  *v = static_cast<int>(n);
  return true;
}

}  // namespace

Result<RedisOptions> ParseRedisUrl(const std::string& url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.rfind(kScheme, 0) != 0) {
    return Status::InvalidArgument("remote url: must start with redis:// (rediss:// TLS is not supported; see docs/remote.md)");
  }
  RedisOptions o;
  std::string rest = url.substr(kScheme.size());
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = cred.find(':');
    if (colon == std::string::npos) {
      AGENTKV_ASSIGN_OR_RETURN(o.password, PercentDecode(cred));  // redis://password@host
    } else {
      AGENTKV_ASSIGN_OR_RETURN(o.user, PercentDecode(cred.substr(0, colon)));
      AGENTKV_ASSIGN_OR_RETURN(o.password, PercentDecode(cred.substr(colon + 1)));
    }
  }
  std::string hostport = rest;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    const std::string db = rest.substr(slash + 1);
    if (!db.empty() && !ParseInt(db, 0, 1 << 20, &o.db)) return Status::InvalidArgument("remote url: bad db number '" + db + "'");
  }
  if (!hostport.empty() && hostport[0] == '[') {  // [ipv6]:port
    const size_t close = hostport.find(']');
    if (close == std::string::npos) return Status::InvalidArgument("remote url: unterminated [ipv6 address]");
    o.host = hostport.substr(1, close - 1);
    hostport = hostport.substr(close + 1);
    if (!hostport.empty() && hostport[0] != ':') return Status::InvalidArgument("remote url: junk after ]");
    if (!hostport.empty() && !ParseInt(hostport.substr(1), 1, 65535, &o.port)) {
      return Status::InvalidArgument("remote url: bad port");
    }
  } else {
    const size_t colon = hostport.rfind(':');
    o.host = hostport.substr(0, colon);
    if (colon != std::string::npos && !ParseInt(hostport.substr(colon + 1), 1, 65535, &o.port)) {
      return Status::InvalidArgument("remote url: bad port '" + hostport.substr(colon + 1) + "'");
    }
  }
  if (o.host.empty()) return Status::InvalidArgument("remote url: no host");
  return o;
}

Status LoadRedisPassword(const std::string& password_file, RedisOptions* options) {
  if (!password_file.empty()) {
    std::ifstream in(password_file);
    if (!in) return Status::InvalidArgument("remote password file: cannot read " + password_file);
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) return Status::InvalidArgument("remote password file: " + password_file + " is empty");
    options->password = line;
    return Status::OK();
  }
  if (const char* p = std::getenv("AGENTKV_REMOTE_PASSWORD"); p != nullptr && *p != '\0') options->password = p;
  return Status::OK();
}

std::string DescribeRedis(const RedisOptions& o) {
  const bool v6 = o.host.find(':') != std::string::npos;
  return "redis://" + (v6 ? "[" + o.host + "]" : o.host) + ":" + std::to_string(o.port) + "/" + std::to_string(o.db);
}

}  // namespace agentkv
