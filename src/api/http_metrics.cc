#include "api/http_metrics.h"

namespace agentkv::api {
namespace {

const char* RouteName(size_t r) {
  static constexpr const char* kNames[] = {"chat_completions", "completions", "models", "health",
                                           "metrics",          "agents",      "messages", "responses",
                                           "other"};
  return kNames[r];
}

}  // namespace

HttpMetrics::HttpMetrics() {
  for (auto& c : requests_) c.store(0, std::memory_order_relaxed);
}

void HttpMetrics::Record(Route route, int http_status) {
  size_t code = kCodes.size() - 1;
  for (size_t i = 0; i + 1 < kCodes.size(); ++i) {
    if (kCodes[i] == http_status) code = i;
  }
  requests_[static_cast<size_t>(route) * kCodes.size() + code].fetch_add(1, std::memory_order_relaxed);
}

std::string HttpMetrics::Render() const {
  std::string out =
      "# HELP agentkv_http_requests_total HTTP requests by route and status code.\n"
      "# TYPE agentkv_http_requests_total counter\n";
  for (size_t r = 0; r < kRoutes; ++r) {
    for (size_t c = 0; c < kCodes.size(); ++c) {
      const uint64_t n = requests_[r * kCodes.size() + c].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out += "agentkv_http_requests_total{route=\"";
      out += RouteName(r);
      out += "\",code=\"";
      out += kCodes[c] == 0 ? std::string("other") : std::to_string(kCodes[c]);
      out += "\"} " + std::to_string(n) + "\n";
    }
  }
  out += "# HELP agentkv_http_streams_open SSE responses currently streaming.\n"
         "# TYPE agentkv_http_streams_open gauge\n"
         "agentkv_http_streams_open " +
         std::to_string(streams_open_.load(std::memory_order_relaxed)) + "\n";
  out += "# HELP agentkv_http_client_disconnects_total Requests cancelled because the client left.\n"
         "# TYPE agentkv_http_client_disconnects_total counter\n"
         "agentkv_http_client_disconnects_total " +
         std::to_string(client_gone_.load(std::memory_order_relaxed)) + "\n";
  return out;
}

}  // namespace agentkv::api
