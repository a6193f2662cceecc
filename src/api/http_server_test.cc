// Real sockets on loopback: the httplib adapter, chunked SSE, body limits,
// and disconnect -> cancellation.

#include "api/http_server.h"

#include <cpp-httplib/httplib.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "api/api_test_util.h"
#include "api/fake_backend.h"

namespace agentkv::api {
namespace {

using namespace agentkv::api::testing;  // NOLINT

const char* kChat = R"({"model":"fake-model","messages":[{"role":"user","content":"héllo 🎉"}]})";
const char* kChatStream =
    R"({"model":"fake-model","stream":true,"messages":[{"role":"user","content":"héllo 🎉"}]})";

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}) {
    options.port = 0;
    server_ = std::make_unique<HttpServer>(&router_, options);
    Result<int> port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
  }
  httplib::Client Client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    return c;
  }
  void TearDown() override {
    if (server_) server_->Stop();
    backend_.JoinAll();
  }

  FakeBackend backend_;
  Router router_{&backend_, ApiKeys()};
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(HttpServerTest, ServesJsonAndSse) {
  StartServer();
  httplib::Client c = Client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  auto plain = c.Post("/v1/chat/completions", kChat, "application/json");
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200) << plain->body;
  const std::string want = json::parse(plain->body)["choices"][0]["message"]["content"];
  EXPECT_EQ(want, "Echo: héllo 🎉");
  EXPECT_TRUE(plain->has_header("X-Request-Id"));

  auto streamed = c.Post("/v1/chat/completions", kChatStream, "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200);
  EXPECT_EQ(streamed->get_header_value("Content-Type"), "text/event-stream");
  SseBody sse = ParseSse(streamed->body);
  EXPECT_EQ(sse.content, want);
  EXPECT_TRUE(sse.done);
}

TEST_F(HttpServerTest, BadInputsGetOpenAiErrorsAndServerStaysUp) {
  HttpServerOptions options;
  options.max_body_bytes = 1024;
  StartServer(options);
  httplib::Client c = Client();
  auto big = c.Post("/v1/chat/completions", std::string(4096, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_TRUE(json::parse(big->body)["error"].is_object()) << big->body;
  for (const char* body : {"{", "null", R"({"messages":[]})", "\xFF\xFE"}) {
    auto r = c.Post("/v1/chat/completions", body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_TRUE(json::parse(r->body)["error"]["message"].is_string());
  }
  auto bad_id = c.Get("/v1/agents/..%2Fetc");
  ASSERT_TRUE(bad_id);
  EXPECT_EQ(bad_id->status, 400);
  auto missing = c.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_TRUE(json::parse(missing->body)["error"].is_object());
  auto ok = c.Post("/v1/chat/completions", kChat, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, StreamClientDisconnectCancels) {
  backend_.config().delay_ms = 20;
  backend_.config().repeat = 500;  // ~minutes if not cancelled
  StartServer();
  httplib::Client c = Client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = kChatStream;
  req.set_header("Content-Type", "application/json");
  size_t received = 0;
  req.content_receiver = [&](const char*, size_t n, size_t, size_t) {
    received += n;
    return received < 200;  // hang up after a few chunks
  };
  auto r = c.send(req);
  EXPECT_GE(received, 200u);
  c.stop();
  EXPECT_TRUE(WaitFor([&] { return backend_.cancelled() == 1; }));
}

TEST_F(HttpServerTest, NonStreamClientDisconnectCancels) {
  backend_.config().delay_ms = 20;
  backend_.config().repeat = 500;
  StartServer();
  {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(0, 300000);  // give up after 300 ms
    auto r = c.Post("/v1/chat/completions", kChat, "application/json");
    EXPECT_FALSE(r);
  }
  EXPECT_TRUE(WaitFor([&] { return backend_.cancelled() == 1; }));
}

TEST_F(HttpServerTest, StopEndsStreamsInFlight) {
  backend_.config().delay_ms = 20;
  backend_.config().repeat = 500;
  StartServer();
  std::thread client([&] {
    httplib::Client c = Client();
    c.Post("/v1/chat/completions", kChatStream, "application/json");
  });
  ASSERT_TRUE(WaitFor([&] { return backend_.submitted() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  client.join();
  EXPECT_TRUE(WaitFor([&] { return backend_.cancelled() == 1; }));
}

TEST(HttpServerTwoTest, TwoServersInOneProcess) {
  FakeBackend a_backend, b_backend;
  b_backend.config().model_id = "other-model";
  Router a(&a_backend, ApiKeys()), b(&b_backend, ApiKeys());
  HttpServerOptions options;
  options.port = 0;
  HttpServer sa(&a, options), sb(&b, options);
  Result<int> pa = sa.Start(), pb = sb.Start();
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_NE(*pa, *pb);
  httplib::Client ca("127.0.0.1", *pa), cb("127.0.0.1", *pb);
  EXPECT_EQ(json::parse(ca.Get("/v1/models")->body)["data"][0]["id"], "fake-model");
  EXPECT_EQ(json::parse(cb.Get("/v1/models")->body)["data"][0]["id"], "other-model");
  // A port in use is reported, not fatal.
  HttpServerOptions taken;
  taken.port = *pa;
  HttpServer sc(&a, taken);
  EXPECT_EQ(sc.Start().status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace agentkv::api

namespace agentkv::api {
namespace {

// Opens a TCP connection to the server that sends nothing. -1 on failure.
int IdleConnection(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// Issue 12: every open connection holds a worker, so idle connections used to
// starve /health once they outnumbered the pool (one worker per connection,
// held up to the keep-alive timeout). The pool now grows on demand.
TEST_F(HttpServerTest, IdleConnectionsDoNotStarveHealth) {
  HttpServerOptions options;
  options.worker_threads = 4;
  options.keep_alive_timeout_s = 5;
  StartServer(options);
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) idle.push_back(IdleConnection(port_));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all accepted and waiting
  const auto t0 = std::chrono::steady_clock::now();
  httplib::Client c = Client();
  auto health = c.Get("/health");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(ms.count(), 1000) << "health waited behind idle connections";
  for (int fd : idle) {
    if (fd >= 0) close(fd);
  }
}

// An idle connection is closed after keep_alive_timeout_s, not held open.
TEST_F(HttpServerTest, IdleConnectionsAreClosed) {
  HttpServerOptions options;
  options.keep_alive_timeout_s = 1;
  StartServer(options);
  const int fd = IdleConnection(port_);
  ASSERT_GE(fd, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char byte;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(recv(fd, &byte, 1, 0), 0);  // EOF: the server closed it
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  close(fd);
}

}  // namespace
}  // namespace agentkv::api
