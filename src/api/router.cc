#include "api/router.h"

#include <algorithm>
#include <new>
#include <random>

#include "api/anthropic_json.h"
#include "util/names.h"
#include "api/openai_json.h"
#include "util/hash.h"
#include "util/log.h"

namespace agentkv::api {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse NotFoundRoute(const HttpRequest& req) {
  ApiError e = InvalidRequest("Unknown route: " + req.method + " " + req.path.substr(0, 200), "",
                              "unknown_route");
  e.http_status = 404;
  e.type = "not_found_error";
  return ErrorResponse(e);
}

HttpResponse MethodNotAllowed(const HttpRequest& req, const char* allowed) {
  ApiError e = InvalidRequest("Method " + req.method + " is not allowed on " + req.path, "",
                              "method_not_allowed");
  e.http_status = 405;
  HttpResponse r = ErrorResponse(e);
  r.headers.emplace_back("Allow", allowed);
  return r;
}

HttpResponse Unauthorized(const Status& status) {
  ApiError e;
  e.http_status = 401;
  e.type = "invalid_request_error";
  e.code = "invalid_api_key";
  e.message = status.message();
  HttpResponse r = ErrorResponse(e);
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

}  // namespace

std::optional<std::string> HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (EqualsIgnoreCase(k, name)) return v;
  }
  return std::nullopt;
}

HttpResponse ErrorResponse(const ApiError& error) {
  HttpResponse r = JsonResponse(error.http_status, ApiErrorJson(error));
  r.error = error;
  if (error.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(error.retry_after_s));
  return r;
}

Router::Router(Backend* backend, ApiKeys keys, RouterOptions options)
    : backend_(backend),
      keys_(std::move(keys)),
      options_(std::move(options)),
      created_unix_s_(std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()),
      tenants_(options_.max_requests_per_tenant),
      parse_budget_(options_.parse_budget ? options_.parse_budget
                                          : std::make_shared<ParseBudget>(options_.max_parsing_bytes)) {
  std::random_device rd;
  id_seed_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::string Router::NextRequestId(Route route) {
  const uint64_t n = next_id_.fetch_add(1, std::memory_order_relaxed);
  const char* prefix = route == Route::kMessages    ? "msg_"
                       : route == Route::kResponses ? "resp_"
                       : route == Route::kChat      ? "chatcmpl-"
                                                    : "cmpl-";
  return prefix + Hex64(Xxh3_64(&n, sizeof(n), id_seed_));
}

std::vector<std::string> Router::ListedModelIds() const {
  std::vector<std::string> ids = {backend_->ModelId()};
  for (const std::string& alias : options_.listed_model_aliases) {
    if (std::find(ids.begin(), ids.end(), alias) == ids.end()) ids.push_back(alias);
  }
  return ids;
}

HttpResponse Router::Handle(const HttpRequest& request) {
  Route route = Route::kOther;
  HttpResponse response;
  auto log = std::make_shared<RequestLog>(request.method, request.path);
  try {
    response = Dispatch(request, &route, log);
  } catch (const std::bad_alloc&) {
    // Memory ran out for this request (others may still fit): 503, retry
    // later; never terminate the process for everyone.
    AKV_LOG_ERROR("api: %s %s: out of memory", EscapeForLog(request.method, 16).c_str(),
                  EscapeForLog(request.path).c_str());
    response = ErrorResponse(ApiErrorFromStatus(Status::Unavailable("The server is out of memory; retry shortly.")));
  } catch (const std::exception& ex) {
    // Method and path are the client's bytes: escaped (no CR/LF injection).
    AKV_LOG_ERROR("api: %s %s: unexpected exception: %s", EscapeForLog(request.method, 16).c_str(),
                  EscapeForLog(request.path).c_str(), EscapeForLog(ex.what()).c_str());
    response = ErrorResponse(ApiErrorFromStatus(Status::Internal("internal error")));
  } catch (...) {
    response = ErrorResponse(ApiErrorFromStatus(Status::Internal("internal error")));
  }
  if (route == Route::kMessages && response.error) {
    // Anthropic's clients read {"type":"error","error":{type,message}}.
    const ApiError e = AnthropicError(*response.error);
    response.status = e.http_status;
    response.body = AnthropicErrorJson(e);
    response.error = e;
  }
  metrics_.Record(route, response.status);
  if (!response.stream) log->Finish(response.status, response.error ? response.error->type : "");
  return response;
}

HttpResponse Router::Dispatch(const HttpRequest& req, Route* route, const std::shared_ptr<RequestLog>& log) {
  const std::string& p = req.path;
  const bool get = req.method == "GET";
  const bool post = req.method == "POST";
  const bool head = req.method == "HEAD";  // httplib answers it with the GET handler, without the body
  if (p == "/") {
    // Clients probe the base URL before their first request (Claude Code: HEAD /).
    *route = Route::kHealth;
    if (!get && !head) return MethodNotAllowed(req, "GET, HEAD");
    return JsonResponse(200, R"({"service":"agentkv","docs":"/v1/models, /health"})");
  }
  if (p == "/health") {
    *route = Route::kHealth;
    if (!get && !head) return MethodNotAllowed(req, "GET, HEAD");
    if (!backend_->IsReady()) {
      HttpResponse r = JsonResponse(503, R"({"status":"loading"})");
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    return JsonResponse(200, R"({"status":"ok"})");
  }

  // Route and method first (a 404/405 needs no key), then authentication.
  const char* allowed = nullptr;
  if (p == "/v1/chat/completions") {
    *route = Route::kChat;
    allowed = "POST";
  } else if (p == "/v1/completions") {
    *route = Route::kCompletion;
    allowed = "POST";
  } else if (p == "/v1/messages") {
    *route = Route::kMessages;
    allowed = "POST";
  } else if (p == "/v1/responses") {
    *route = Route::kResponses;
    allowed = "POST";
  } else if (p == "/v1/models") {
    *route = Route::kModels;
    allowed = "GET";
  } else if (p == "/metrics") {
    *route = Route::kMetrics;
    allowed = "GET";
  } else if (p == "/v1/agents") {
    *route = Route::kAgents;
    allowed = "GET";
  } else if (p.rfind("/v1/agents/", 0) == 0) {
    *route = Route::kAgents;
    allowed = "GET, DELETE";
  } else {
    return NotFoundRoute(req);
  }
  const bool method_ok = std::string_view(allowed).find(req.method) != std::string_view::npos &&
                         (get || post || req.method == "DELETE");
  if (!method_ok) return MethodNotAllowed(req, allowed);

  if (*route == Route::kMetrics) {  // server-wide: the admin key, not a tenant's
    switch (keys_.AuthenticateAdmin(req.Header("Authorization").value_or(""))) {
      case ApiKeys::AdminAccess::kGranted: {
        HttpResponse r = JsonResponse(200, backend_->MetricsText() + metrics_.Render());
        r.content_type = "text/plain; version=0.0.4; charset=utf-8";
        return r;
      }
      case ApiKeys::AdminAccess::kBadKey:
        return Unauthorized(Status::InvalidArgument("/metrics needs the admin key (--admin-key)."));
      case ApiKeys::AdminAccess::kDisabled: {
        ApiError e = InvalidRequest(
            "/metrics is server-wide and disabled when API keys are configured; start the server with "
            "--admin-key to enable it.",
            "", "admin_key_required");
        e.http_status = 403;
        e.type = "permission_error";
        return ErrorResponse(e);
      }
    }
  }
  // Anthropic's clients send the key as x-api-key.
  std::optional<std::string> authorization = req.Header("Authorization");
  if (!authorization) {
    if (auto key = req.Header("x-api-key")) authorization = "Bearer " + *key;
  }
  Result<ApiKeys::Tenant> tenant = keys_.AuthenticateTenant(authorization.value_or(""));
  if (!tenant.ok()) return Unauthorized(tenant.status());
  const std::string* ns = &tenant->namespace_id;

  switch (*route) {
    case Route::kChat:
    case Route::kCompletion:
    case Route::kMessages:
    case Route::kResponses:
      return Generate(req, *ns, *route, tenant->isolated, log);
    case Route::kModels:
      if (!backend_->IsReady()) {
        return ErrorResponse(ApiErrorFromStatus(Status::Unavailable("The model is loading.")));
      }
      // Anthropic's SDK (it always sends anthropic-version) reads another shape.
      if (req.Header("anthropic-version")) return JsonResponse(200, AnthropicModelsJson(ListedModelIds(), created_unix_s_));
      return JsonResponse(200, ModelsJson(ListedModelIds(), created_unix_s_));
    case Route::kAgents:
      return Agents(req, *ns);
    default:
      return NotFoundRoute(req);
  }
}

HttpResponse Router::Agents(const HttpRequest& req, const std::string& ns) {
  if (req.path == "/v1/agents") {
    Result<std::vector<AgentInfo>> agents = backend_->ListAgents(ns);
    if (!agents.ok()) return ErrorResponse(ApiErrorFromStatus(agents.status()));
    return JsonResponse(200, AgentListJson(*agents));
  }
  // Everything after the prefix is the id, slashes included, so that
  // "/v1/agents/../x" (decoded) is refused by validation, not re-routed.
  const std::string id = req.path.substr(std::string_view("/v1/agents/").size());
  Status valid = ValidateName("agent id", id);
  if (!valid.ok()) return ErrorResponse(InvalidRequest(valid.message(), "agent_id", "invalid_agent_id"));

  if (req.method == "GET") {
    Result<AgentInfo> agent = backend_->GetAgent(ns, id);
    if (!agent.ok()) return ErrorResponse(ApiErrorFromStatus(agent.status(), "agent_id"));
    return JsonResponse(200, AgentJson(*agent));
  }
  bool evict_only = false;
  if (auto it = req.query.find("evict_only"); it != req.query.end()) {
    if (it->second == "true" || it->second == "1") {
      evict_only = true;
    } else if (it->second != "false" && it->second != "0") {
      return ErrorResponse(InvalidRequest("'evict_only' must be true or false.", "evict_only",
                                          "invalid_value"));
    }
  }
  Status st = backend_->DeleteAgent(ns, id, evict_only);
  if (!st.ok()) return ErrorResponse(ApiErrorFromStatus(st, "agent_id"));
  return JsonResponse(200, AgentDeletedJson(id, evict_only));
}

}  // namespace agentkv::api
