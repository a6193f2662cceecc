#include "api/request_log.h"

#include <cctype>
#include <cstdio>

#include "util/log.h"

namespace agentkv::api {
namespace {

constexpr size_t kMaxValueBytes = 128;

bool PlainChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '/' || c == ':' || c == '+' ||
         c == '-';
}

// Escaped (EscapeForLog: no control or non-ASCII bytes; a backslash is \\),
// quotes as \", quoted unless every byte is plain.
std::string Value(std::string_view v) {
  const std::string escaped = EscapeForLog(v, kMaxValueBytes);
  bool plain = !escaped.empty();
  std::string out;
  out.reserve(escaped.size() + 2);
  for (char c : escaped) {
    plain = plain && PlainChar(c);
    if (c == '"') out += '\\';
    out += c;
  }
  return plain ? out : "\"" + out + "\"";
}

void Add(std::string* line, const char* key, std::string_view value) {
  if (value.empty()) return;
  *line += ' ';
  *line += key;
  *line += '=';
  *line += Value(value);
}

void AddNumber(std::string* line, const char* key, double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, " %s=%.*f", key, decimals, v);
  *line += buf;
}

}  // namespace

std::string FormatRequestLog(const RequestLogEntry& e) {
  std::string line = "request";
  Add(&line, "method", e.method);
  Add(&line, "route", e.route);
  AddNumber(&line, "status", e.status, 0);
  Add(&line, "error", e.error_type);
  Add(&line, "ns", e.namespace_id);
  Add(&line, "agent", e.agent_id);
  Add(&line, "source", e.agent_source);
  if (e.usage) {
    const Usage& u = *e.usage;
    if (u.agent_id != e.agent_id) Add(&line, "served", u.agent_id);  // implicit, or a side agent
    Add(&line, "side_of", u.side_of);
    AddNumber(&line, "prompt_tokens", static_cast<double>(u.prompt_tokens), 0);
    AddNumber(&line, "cached_tokens", static_cast<double>(u.cached_tokens), 0);
    AddNumber(&line, "prefilled", static_cast<double>(u.tokens_prefilled), 0);
    if (u.shared_tokens > 0) AddNumber(&line, "shared", static_cast<double>(u.shared_tokens), 0);
    if (u.respelled_tokens > 0) AddNumber(&line, "respelled", static_cast<double>(u.respelled_tokens), 0);
    AddNumber(&line, "completion_tokens", static_cast<double>(u.completion_tokens), 0);
    Add(&line, "cache", CacheStateName(u.cache_state));
    Add(&line, "match", MatchTypeName(u.match));
    if (u.ttft_ms > 0) AddNumber(&line, "ttft_ms", u.ttft_ms, 1);
  }
  AddNumber(&line, "total_ms", e.total_ms, 1);
  if (e.stream) line += " stream=true";
  return line;
}

LogLevel RequestLogLevel(std::string_view method, std::string_view route, int status) {
  const bool poll = (method == "GET" || method == "HEAD") && (route == "/" || route == "/health" || route == "/v1/models");
  return poll && status < 400 ? LogLevel::kDebug : LogLevel::kInfo;
}

RequestLog::RequestLog(std::string method, std::string route) {
  entry_.method = std::move(method);
  entry_.route = std::move(route);
}

RequestLog::~RequestLog() { Finish(499, "client_gone"); }

void RequestLog::SetAgent(const std::string& namespace_id, const std::string& agent_id,
                          const std::string& agent_source) {
  MutexLock lock(&mu_);
  entry_.namespace_id = namespace_id;
  entry_.agent_id = agent_id;
  entry_.agent_source = agent_source;
}

void RequestLog::SetUsage(const Usage& usage) {
  MutexLock lock(&mu_);
  entry_.usage = usage;
}

void RequestLog::Finish(int status, const std::string& error_type) {
  MutexLock lock(&mu_);
  if (logged_) return;
  logged_ = true;
  const LogLevel level = RequestLogLevel(entry_.method, entry_.route, status);
  if (!LogEnabled(level)) return;
  entry_.status = status;
  entry_.error_type = error_type;
  entry_.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  LogF(level, "%s", FormatRequestLog(entry_).c_str());
}

}  // namespace agentkv::api
