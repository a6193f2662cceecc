#pragma once
// Router: the whole HTTP API as a function Handle(request) -> response,
// with no sockets, so every route is testable in-process. http_server.h
// adapts it to cpp-httplib.
//
// Routes (docs/api.md):
//   GET    /health                      no auth; 503 while loading
//   GET    /v1/models
//   POST   /v1/chat/completions         JSON or SSE
//   POST   /v1/completions              JSON or SSE
//   POST   /v1/messages                 Anthropic Messages API, JSON or SSE;
//                                       every error in Anthropic's shape
//   POST   /v1/responses                OpenAI Responses API, JSON or SSE
//                                       (stateless: nothing is stored)
//   GET    /metrics                     Prometheus text
//   GET    /v1/agents                   the caller's namespace only
//   GET    /v1/agents/{id}
//   DELETE /v1/agents/{id}[?evict_only=true]
//
// Thread safety: Handle may be called concurrently from many threads.
// Handle never throws: every failure becomes an OpenAI error response
// (Anthropic's shape on /v1/messages). Every request is logged once, at info
// level, when its response is complete (request_log.h).
//
// Authentication takes "Authorization: Bearer KEY" or, as Anthropic's
// clients send it, "x-api-key: KEY" (Authorization wins when both are sent).

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/auth.h"
#include "api/backend.h"
#include "api/errors.h"
#include "api/http_metrics.h"
#include "api/parse_budget.h"
#include "api/request_log.h"
#include "api/tenant_limiter.h"

namespace agentkv::api {

struct HttpRequest {
  std::string method;                              // "GET", "POST", ...
  std::string path;                                // percent-decoded, no query
  std::multimap<std::string, std::string> query;   // decoded
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Polled while the request waits for the backend; true once the client has
  // gone (or the server is stopping). Null = never.
  std::function<bool()> client_gone;

  // Case-insensitive header lookup; the first value.
  std::optional<std::string> Header(std::string_view name) const;
};

// A streamed body, pulled by the HTTP adapter (or a test).
// Thread safety: Read and Cancel are called from one thread.
class BodyStream {
 public:
  enum class ReadResult { kData, kIdle, kEnd };
  virtual ~BodyStream() = default;
  // Waits up to `wait` for more bytes. kData: bytes appended to *out.
  // kIdle: nothing yet (check the client, call again). kEnd: the body is complete.
  virtual ReadResult Read(std::chrono::milliseconds wait, std::string* out) = 0;
  // The client went away: cancel the generation. Idempotent. Destroying an
  // unfinished stream cancels too.
  virtual void Cancel() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::shared_ptr<BodyStream> stream;  // non-null: the body comes from here
  // Set by ErrorResponse: what the body says, so that the router can render
  // it again in another API's shape (Anthropic's on /v1/messages).
  std::optional<ApiError> error;
};

struct RouterOptions {
  std::vector<std::string> model_aliases;  // also accepted as "model" (with strict_model_name)
  std::vector<std::string> listed_model_aliases;  // --alias: listed by /v1/models after the served id
  bool strict_model_name = false;  // only the served id and model_aliases are accepted (model_name.h)
  size_t max_body_bytes = size_t{32} << 20;
  std::chrono::milliseconds poll_interval{50};  // client-gone checks while waiting
  // Generation requests one namespace may have in flight (queued or
  // generating); more are 429. 0: no cap (tenant_limiter.h).
  size_t max_requests_per_tenant = 0;
  // Request-body bytes parsed at once across all requests; a body that does
  // not fit is 503 before its parse (parse_budget.h). 48 MiB: ~1.2 GB of
  // JSON DOM at the measured ~25x, one maximal body plus 16 MiB of others.
  // 0: no bound. docs/api.md, "Request limits: nesting and memory".
  size_t max_parsing_bytes = size_t{48} << 20;
  // Shared by routers of one process (and tests); null: a budget of
  // max_parsing_bytes of this router's own.
  std::shared_ptr<ParseBudget> parse_budget;
};

class Router {
 public:
  // `backend` is not owned and must outlive the Router and every stream it
  // returned.
  Router(Backend* backend, ApiKeys keys, RouterOptions options = {});

  HttpResponse Handle(const HttpRequest& request);

  HttpMetrics& metrics() { return metrics_; }

 private:
  // `log`: the request's log line (request_log.h); a streamed response's
  // body holds it and logs it when the stream ends.
  HttpResponse Dispatch(const HttpRequest& request, Route* route, const std::shared_ptr<RequestLog>& log);
  // route: kChat, kCompletion, kMessages or kResponses.
  // `isolated`: the key's attribute (GenerationRequest::isolated).
  HttpResponse Generate(const HttpRequest& request, const std::string& namespace_id, Route route, bool isolated,
                        const std::shared_ptr<RequestLog>& log);
  HttpResponse Agents(const HttpRequest& request, const std::string& namespace_id);
  std::string NextRequestId(Route route);
  std::vector<std::string> ListedModelIds() const;

  Backend* backend_;
  ApiKeys keys_;
  RouterOptions options_;
  int64_t created_unix_s_;
  uint64_t id_seed_;
  std::atomic<uint64_t> next_id_{0};
  HttpMetrics metrics_;
  TenantLimiter tenants_;
  std::shared_ptr<ParseBudget> parse_budget_;  // never null
};

// An error response (status, Retry-After, JSON body).
HttpResponse ErrorResponse(const ApiError& error);

}  // namespace agentkv::api
