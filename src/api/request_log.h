#pragma once
// One log line per HTTP request, at info level (stderr, with the rest of the
// logs; successful health and discovery polls at debug: RequestLogLevel), so
// that a user can see what a client sent and how the cache served it:
//   request method=POST route=/v1/messages status=200 ns=default
//     agent=S source=X-Claude-Code-Session-Id served=S-side-0123abcd...
//     prompt_tokens=13133 cached_tokens=13100 prefilled=33 cache=resident
//     match=extend ttft_ms=41.2 total_ms=380.5 stream=true
// (one line). Fields without a value for the request are left out; an error
// adds error=<its type>. Every value is the client's text at worst (paths,
// agent ids, header names): it is escaped (no control bytes, no raw quotes)
// and capped, and quoted when it has anything but [A-Za-z0-9._/:+-], so a
// client can neither forge a line nor a field. docs/api.md, "Request log".

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "api/backend.h"
#include "util/log.h"
#include "util/mutex.h"

namespace agentkv::api {

// What one request's line says.
struct RequestLogEntry {
  std::string method;
  std::string route;  // the request's path
  int status = 0;
  std::string error_type;  // empty: none
  std::string namespace_id;
  std::string agent_id;      // as named by the request; empty: implicit
  std::string agent_source;  // AgentIdentity::source; empty: implicit
  std::optional<Usage> usage;  // once the backend admitted it
  bool stream = false;
  double total_ms = 0.0;
};

// The line (without the logger's "agentkv info: " prefix). Pure.
std::string FormatRequestLog(const RequestLogEntry& entry);

// The level of a request's line: debug for a poll that succeeded (status
// below 400; GET or HEAD of "/", "/health" or "/v1/models", which clients
// and load balancers send every few seconds), info for every other request
// and for a poll that failed (a bad key, the model still loading). Pure.
LogLevel RequestLogLevel(std::string_view method, std::string_view route, int status);

// A request's entry, filled by the threads that learn its parts (the HTTP
// handler, the stream that ends it), and logged once.
// Thread safety: every method may be called from any thread.
class RequestLog {
 public:
  RequestLog(std::string method, std::string route);
  ~RequestLog();  // logs now if nothing did (a stream dropped unread: 499)

  void SetAgent(const std::string& namespace_id, const std::string& agent_id, const std::string& agent_source);
  void SetUsage(const Usage& usage);
  void SetStream() { MutexLock lock(&mu_); entry_.stream = true; }
  // The first call logs the line with this status and error type (empty:
  // none); later calls do nothing.
  void Finish(int status, const std::string& error_type);

 private:
  Mutex mu_;
  RequestLogEntry entry_ GUARDED_BY(mu_);
  bool logged_ GUARDED_BY(mu_) = false;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace agentkv::api
