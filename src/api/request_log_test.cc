// The request log line: its fields, and that client text cannot forge a
// line or a field.
#include "api/request_log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace agentkv::api {
namespace {

RequestLogEntry Entry() {
  RequestLogEntry e;
  e.method = "POST";
  e.route = "/v1/messages";
  e.status = 200;
  e.namespace_id = "default";
  e.agent_id = "sess-1";
  e.agent_source = "X-Claude-Code-Session-Id";
  Usage u;
  u.agent_id = "sess-1";
  u.prompt_tokens = 1000;
  u.cached_tokens = 990;
  u.tokens_prefilled = 10;
  u.completion_tokens = 5;
  u.cache_state = CacheState::kResident;
  u.match = MatchType::kExtend;
  u.ttft_ms = 12.34;
  e.usage = u;
  e.total_ms = 56.78;
  e.stream = true;
  return e;
}

TEST(RequestLogTest, OneLineOfKeyValues) {
  EXPECT_EQ(FormatRequestLog(Entry()),
            "request method=POST route=/v1/messages status=200 ns=default agent=sess-1 "
            "source=X-Claude-Code-Session-Id prompt_tokens=1000 cached_tokens=990 prefilled=10 completion_tokens=5 "
            "cache=resident match=extend ttft_ms=12.3 total_ms=56.8 stream=true");
}

TEST(RequestLogTest, SideAgentsImplicitAgentsAndErrors) {
  RequestLogEntry e = Entry();
  e.usage->agent_id = "sess-1-side-00112233aabbccdd";
  e.usage->side_of = "sess-1";
  EXPECT_NE(FormatRequestLog(e).find(" served=sess-1-side-00112233aabbccdd side_of=sess-1 "), std::string::npos);
  RequestLogEntry err;
  err.method = "GET";
  err.route = "/nowhere";
  err.status = 404;
  err.error_type = "not_found_error";
  EXPECT_EQ(FormatRequestLog(err), "request method=GET route=/nowhere status=404 error=not_found_error total_ms=0.0");
}

TEST(RequestLogTest, ClientTextCannotForgeALineOrAField) {
  RequestLogEntry e = Entry();
  e.agent_id = "h-1\nagentkv info: request method=GET status=200";
  e.route = "/v1/messages\" status=500 x=\"";
  e.agent_source = std::string(1000, 'a');
  const std::string line = FormatRequestLog(e);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find('\r'), std::string::npos);
  EXPECT_NE(line.find(R"(agent="h-1\x0aagentkv info: request method=GET status=200")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"(route="/v1/messages\" status=500 x=\"")"), std::string::npos) << line;
  EXPECT_LT(line.size(), 700u);  // capped
  // Read as key=value pairs (quotes group, \" escapes), the line has exactly
  // its own fields: the forged ones are inside quoted values.
  std::vector<std::string> keys;
  std::string status;
  for (size_t i = std::string("request ").size(); i < line.size();) {
    const size_t eq = line.find('=', i);
    ASSERT_NE(eq, std::string::npos) << line.substr(i);
    keys.push_back(line.substr(i, eq - i));
    size_t j = eq + 1;
    if (line[j] == '"') {
      for (++j; line[j] != '"'; ++j) {
        if (line[j] == '\\') ++j;
        ASSERT_LT(j, line.size());
      }
      ++j;
    } else {
      while (j < line.size() && line[j] != ' ') ++j;
    }
    if (keys.back() == "status") status = line.substr(eq + 1, j - eq - 1);
    i = j + 1;
  }
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "status"), 1) << line;
  EXPECT_EQ(status, "200");
  EXPECT_EQ(keys.size(), 16u) << line;  // Entry()'s 15, and served= (agent differs from usage's)
}

TEST(RequestLogTest, SuccessfulPollsAreDebugEverythingElseInfo) {
  struct Case {
    const char* method;
    const char* route;
    int status;
    LogLevel level;
  };
  const Case cases[] = {
      {"GET", "/health", 200, LogLevel::kDebug},      {"HEAD", "/health", 200, LogLevel::kDebug},
      {"HEAD", "/", 200, LogLevel::kDebug},           {"GET", "/", 200, LogLevel::kDebug},
      {"GET", "/v1/models", 200, LogLevel::kDebug},
      // A failed poll says something a user needs to see.
      {"GET", "/v1/models", 401, LogLevel::kInfo},    {"GET", "/health", 503, LogLevel::kInfo},
      // Not a poll.
      {"POST", "/health", 405, LogLevel::kInfo},      {"POST", "/v1/messages", 200, LogLevel::kInfo},
      {"GET", "/v1/agents", 200, LogLevel::kInfo},    {"GET", "/metrics", 200, LogLevel::kInfo},
      {"GET", "/v1/models/x", 404, LogLevel::kInfo},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(RequestLogLevel(c.method, c.route, c.status), c.level) << c.method << " " << c.route << " " << c.status;
  }
}

TEST(RequestLogTest, APollWritesNoInfoLine) {
  if (LogEnabled(LogLevel::kDebug)) GTEST_SKIP() << "AGENTKV_LOG=debug prints polls too";
  ::testing::internal::CaptureStderr();
  RequestLog("GET", "/health").Finish(200, "");
  RequestLog("HEAD", "/").Finish(200, "");
  RequestLog("GET", "/v1/models").Finish(200, "");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ::testing::internal::CaptureStderr();
  RequestLog("POST", "/v1/chat/completions").Finish(200, "");
  const std::string line = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(line.starts_with("agentkv info: request method=POST route=/v1/chat/completions status=200 ")) << line;
}

}  // namespace
}  // namespace agentkv::api
