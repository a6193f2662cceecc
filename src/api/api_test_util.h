#pragma once
// Helpers shared by router_test.cc and http_server_test.cc.

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/router.h"

namespace agentkv::api::testing {

using nlohmann::json;

inline HttpRequest Req(std::string method, std::string path, std::string body = "",
                       std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

// Reads a streamed body to the end (fails the test after 10 s).
inline std::string Drain(const HttpResponse& r) {
  if (!r.stream) return r.body;
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (r.stream->Read(std::chrono::milliseconds(20), &out) == BodyStream::ReadResult::kEnd) return out;
  }
  ADD_FAILURE() << "stream did not end";
  return out;
}

// A parsed SSE body.
struct SseBody {
  std::vector<json> chunks;  // every data: line but [DONE]
  std::string content;       // concatenated delta.content / text
  std::string finish_reason;
  json usage;                // from the usage chunk, or null
  json error;                // from an error event, or null
  bool done = false;         // saw [DONE]
};

inline SseBody ParseSse(const std::string& sse) {
  SseBody b;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    if (end == std::string::npos) {
      ADD_FAILURE() << "unterminated SSE frame";
      break;
    }
    std::string data = sse.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(data.rfind("data: ", 0), 0u);
    data = data.substr(6);
    EXPECT_FALSE(b.done) << "data after [DONE]";
    if (data == "[DONE]") {
      b.done = true;
      continue;
    }
    json j = json::parse(data);
    if (j.contains("error")) {
      b.error = j["error"];
      continue;
    }
    b.chunks.push_back(j);
    if (j.contains("usage") && !j["usage"].is_null()) b.usage = j["usage"];
    for (const json& c : j["choices"]) {
      if (c.contains("delta") && c["delta"].contains("content")) b.content += c["delta"]["content"];
      if (c.contains("text")) b.content += c["text"];
      if (!c["finish_reason"].is_null()) b.finish_reason = c["finish_reason"];
    }
  }
  return b;
}

}  // namespace agentkv::api::testing
