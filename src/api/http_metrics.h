#pragma once
// Counters the HTTP layer keeps itself (the backend renders the rest).
//
// Thread safety: lock-free; Record and Render may run concurrently.
// One instance per Router: no global state, two servers per process are fine.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace agentkv::api {

enum class Route {
  kChat,
  kCompletion,
  kModels,
  kHealth,
  kMetrics,
  kAgents,  // list, get, delete
  kMessages,  // Anthropic POST /v1/messages
  kResponses,  // OpenAI POST /v1/responses
  kOther,   // unknown path or method
  kCount
};

class HttpMetrics {
 public:
  HttpMetrics();
  void Record(Route route, int http_status);
  void StreamOpened() { streams_open_.fetch_add(1, std::memory_order_relaxed); }
  void StreamClosed() { streams_open_.fetch_sub(1, std::memory_order_relaxed); }
  void ClientGone() { client_gone_.fetch_add(1, std::memory_order_relaxed); }
  // Prometheus text: agentkv_http_requests_total{route,code},
  // agentkv_http_streams_open, agentkv_http_client_disconnects_total.
  std::string Render() const;

 private:
  static constexpr std::array<int, 13> kCodes = {200, 400, 401, 404, 405, 409, 413,
                                                 429, 499, 500, 503, 529, 0};  // 0 = other
  static constexpr size_t kRoutes = static_cast<size_t>(Route::kCount);
  std::array<std::atomic<uint64_t>, kRoutes * kCodes.size()> requests_;
  std::atomic<int64_t> streams_open_{0};
  std::atomic<uint64_t> client_gone_{0};
};

}  // namespace agentkv::api
