#include "api/http_server.h"

#include <algorithm>
#include <exception>
#include <new>

#include <cpp-httplib/httplib.h>

#include "api/worker_pool.h"
#include "util/log.h"

namespace agentkv::api {
namespace {

constexpr std::chrono::milliseconds kStreamPoll{100};

// Takes the body out of `req` rather than copying it: up to max_body_bytes
// per request in flight (issue 29). httplib's server reads no request body
// after the handler (only method and headers, for the response).
HttpRequest ToHttpRequest(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  for (const auto& [k, v] : req.params) r.query.emplace(k, v);
  for (const auto& [k, v] : req.headers) r.headers.emplace_back(k, v);
  r.body = std::move(const_cast<httplib::Request&>(req).body);
  return r;
}

void ApplyHeaders(const HttpResponse& from, httplib::Response* to) {
  to->status = from.status;
  for (const auto& [k, v] : from.headers) to->set_header(k, v);
}

}  // namespace

HttpServer::HttpServer(Router* router, HttpServerOptions options)
    : router_(router), options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

Result<int> HttpServer::Start() {
  assert(server_ == nullptr && "HttpServer::Start called twice");
  server_ = std::make_unique<httplib::Server>();
  httplib::Server& s = *server_;
  const size_t base = options_.worker_threads > 0 ? static_cast<size_t>(options_.worker_threads) : size_t{8};
  const size_t max = std::max(base, static_cast<size_t>(std::max(options_.max_worker_threads, 0)));
  s.new_task_queue = [base, max] { return new WorkerPool(base, max, std::chrono::seconds(3)); };
  // httplib sets SO_REUSEPORT by default, which lets a second server bind
  // the same port and silently share its connections. SO_REUSEADDR only:
  // quick restarts, but "port in use" is reported.
  s.set_socket_options([](socket_t sock) {
    const int one = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  });
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(options_.read_timeout_s, 0);
  s.set_keep_alive_timeout(options_.keep_alive_timeout_s);
  s.set_write_timeout(options_.write_timeout_s, 0);

  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    HttpRequest request = ToHttpRequest(req);
    request.client_gone = [this, &req] { return stopping_.load() || req.is_connection_closed(); };
    HttpResponse response = router_->Handle(request);
    ApplyHeaders(response, &res);
    if (!response.stream) {
      res.set_content(std::move(response.body), response.content_type);
      return;
    }
    std::shared_ptr<BodyStream> stream = response.stream;
    auto provider = [this, stream, &req](size_t, httplib::DataSink& sink) -> bool {
      for (;;) {
        std::string bytes;
        switch (stream->Read(kStreamPoll, &bytes)) {
          case BodyStream::ReadResult::kData:
            if (!sink.write(bytes.data(), bytes.size())) {
              stream->Cancel();
              return false;
            }
            return true;
          case BodyStream::ReadResult::kEnd:
            sink.done();
            return true;
          case BodyStream::ReadResult::kIdle:
            if (stopping_.load() || req.is_connection_closed()) {
              stream->Cancel();
              return false;
            }
            break;
        }
      }
    };
    res.set_chunked_content_provider(response.content_type, std::move(provider),
                                     [stream](bool success) {
                                       if (!success) stream->Cancel();
                                     });
  };
  for (const char* pattern : {".*"}) {
    s.Get(pattern, handler);
    s.Post(pattern, handler);
    s.Delete(pattern, handler);
    s.Put(pattern, handler);
    s.Patch(pattern, handler);
    s.Options(pattern, handler);
  }
  // Errors httplib answers itself (413 over the body limit, 400 on a bad
  // request line) get OpenAI JSON too; our own responses already have a body.
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e = ApiErrorFromStatus(Status::InvalidArgument(httplib::status_message(res.status)));
    e.http_status = res.status;
    if (res.status == 413) e.code = "request_too_large";
    if (res.status >= 500) e.type = "server_error";
    res.set_content(ApiErrorJson(e), "application/json");
  });
  // An exception httplib caught around our handler (reading the body
  // included): out of memory is 503 (retry later), anything else 500.
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    Status status = Status::Internal("internal error");
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::bad_alloc&) {
      status = Status::Unavailable("The server is out of memory; retry shortly.");
    } catch (...) {
    }
    const ApiError e = ApiErrorFromStatus(status);
    res.status = e.http_status;
    if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
    res.set_content(ApiErrorJson(e), "application/json");
  });

  const int port = options_.port == 0 ? s.bind_to_any_port(options_.host)
                                      : (s.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0) {
    server_.reset();
    return Status::Unavailable("http server: cannot bind " + options_.host + ":" +
                               std::to_string(options_.port));
  }
  thread_ = std::thread([this] {
    if (!server_->listen_after_bind()) AKV_LOG_ERROR("http server: listen failed");
  });
  server_->wait_until_ready();
  AKV_LOG_INFO("http server: listening on http://%s:%d", options_.host.c_str(), port);
  return port;
}

void HttpServer::Stop() {
  if (server_ == nullptr) return;
  stopping_.store(true);
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace agentkv::api
