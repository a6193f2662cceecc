#pragma once
// HttpServer: cpp-httplib in front of a Router. Thin on purpose: it copies
// requests into HttpRequest, writes HttpResponse back, streams BodyStream
// bodies with chunked transfer encoding, and turns "client gone" (socket
// closed, write failed) and Stop() into cancellation.
//
// Thread safety: Start/Stop from one controlling thread; requests are served
// on httplib's worker pool. Two servers can run in one process.

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "api/router.h"
#include "util/status.h"

namespace httplib {
class Server;
}

namespace agentkv::api {

// cpp-httplib gives every connection a worker thread for as long as it is
// open, idle or not: before a request arrives it waits up to
// keep_alive_timeout_s, while a request arrives up to read_timeout_s per
// read. So the pool (worker_pool.h) grows on demand up to max_worker_threads, idle waits are
// short, and 1,000 idle connections or a few dozen slow-loris clients cannot
// take every worker from /health (bench/hostile_clients.py measures it).
// Remaining limit: more than max_worker_threads connections trickling bytes
// faster than read_timeout_s still queue new ones; put a proxy with
// per-client limits in front of a server exposed beyond trusted clients.
struct HttpServerOptions {
  std::string host = "127.0.0.1";  // loopback unless asked otherwise
  int port = 8080;                 // 0: any free port (see Start's result)
  size_t max_body_bytes = size_t{32} << 20;  // larger bodies: 413
  int worker_threads = 0;          // threads kept when idle; 0: 8
  int max_worker_threads = 2048;   // grown on demand (>= worker_threads); idle ones exit after 3 s
  int read_timeout_s = 10;         // per read of a request (headers, body)
  int keep_alive_timeout_s = 2;    // a connection idle this long (before or between requests) is closed
  int write_timeout_s = 60;        // per write to a slow client
};

class HttpServer {
 public:
  // `router` is not owned and must outlive the server.
  HttpServer(Router* router, HttpServerOptions options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port and serves on a background thread. Returns the bound
  // port. Unavailable if the address cannot be bound. REQUIRES: not started.
  Result<int> Start();

  // Stops accepting, cancels waiting and streaming requests, joins the
  // serving thread. Idempotent.
  void Stop();

 private:
  Router* router_;
  HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
};

}  // namespace agentkv::api
