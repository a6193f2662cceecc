#include "api/router.h"

#include <thread>

#include <gtest/gtest.h>

#include "api/api_test_util.h"
#include "api/fake_backend.h"
#include "api/utf8.h"

namespace agentkv::api {
namespace {

using namespace agentkv::api::testing;  // NOLINT

// The JSON of `base` with `extra` (",\"k\":v...") spliced in before the final '}'.
std::string Body(const json& base, const std::string& extra = "") {
  std::string s = base.dump();
  s.insert(s.size() - 1, extra);
  return s;
}

std::string ChatBody(const std::string& user, const std::string& extra = "") {
  return Body({{"model", "fake-model"}, {"messages", {{{"role", "user"}, {"content", user}}}}}, extra);
}

std::optional<std::string> Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return std::nullopt;
}

void ExpectError(const HttpResponse& r, int status, const std::string& param = "") {
  EXPECT_EQ(r.status, status) << r.body;
  ASSERT_FALSE(r.stream);
  json j = json::parse(r.body);
  ASSERT_TRUE(j.contains("error")) << r.body;
  for (const char* k : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(k)) << k;
  EXPECT_TRUE(j["error"]["message"].is_string());
  if (!param.empty()) EXPECT_EQ(j["error"]["param"], param) << r.body;
}

class RouterTest : public ::testing::Test {
 protected:
  HttpResponse Post(const std::string& path, const std::string& body,
                    std::vector<std::pair<std::string, std::string>> headers = {}) {
    return router_.Handle(Req("POST", path, body, std::move(headers)));
  }
  HttpResponse Get(const std::string& path) { return router_.Handle(Req("GET", path)); }

  FakeBackend backend_;
  Router router_{&backend_, ApiKeys()};
};

TEST_F(RouterTest, HealthFollowsReadiness) {
  backend_.set_ready(false);
  HttpResponse r = Get("/health");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(json::parse(r.body)["status"], "loading");
  ExpectError(Post("/v1/chat/completions", ChatBody("hi")), 503);
  EXPECT_EQ(Header(Post("/v1/chat/completions", ChatBody("hi")), "Retry-After"), "1");
  ExpectError(Get("/v1/models"), 503);
  EXPECT_EQ(backend_.submitted(), 0);
  backend_.set_ready(true);
  EXPECT_EQ(Get("/health").status, 200);
}

// Claude Code probes its base URL with HEAD / before the first request (issue 30).
TEST_F(RouterTest, BaseUrlAnswersGetAndHead) {
  EXPECT_EQ(Get("/").status, 200);
  EXPECT_EQ(router_.Handle(Req("HEAD", "/")).status, 200);
  EXPECT_EQ(router_.Handle(Req("HEAD", "/health")).status, 200);
  EXPECT_EQ(router_.Handle(Req("POST", "/")).status, 405);
}

TEST_F(RouterTest, Models) {
  HttpResponse r = Get("/v1/models");
  ASSERT_EQ(r.status, 200);
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "fake-model");
}

TEST_F(RouterTest, NonStreamChat) {
  HttpResponse r = Post("/v1/chat/completions", ChatBody("hi there", R"(,"agent_id":"a1")"));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Echo: hi there");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);  // 14 bytes in 3-byte pieces
  EXPECT_EQ(j["usage"]["agentkv"]["agent_id"], "a1");
  EXPECT_EQ(j["usage"]["agentkv"]["cache_state"], "cold");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(Header(r, "X-Request-Id"), j["id"].get<std::string>());
  GenerationRequest seen = backend_.last_request();
  EXPECT_EQ(seen.namespace_id, "default");
  EXPECT_EQ(seen.agent_id, "a1");
  // The second turn reuses the agent.
  j = json::parse(Post("/v1/chat/completions", ChatBody("hi there again", R"(,"agent_id":"a1")")).body);
  EXPECT_GT(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(j["usage"]["agentkv"]["match"], "extend");
}

// The issue's headline requirement: streamed deltas == non-streamed text,
// byte for byte, with code points split by the backend and stop strings.
TEST_F(RouterTest, StreamEqualsNonStream) {
  const std::vector<std::string> texts = {"plain ascii", "héllo wörld — 日本語 🎉🎉",
                                          "stop HERE please", "🎉x", "a"};
  // Prefixes with bytes a model might emit: a cut code point, invalid bytes.
  const std::vector<std::string> prefixes = {"Echo: ", "ab\xF0\x9F", "\xE2\x82\xFF!"};
  for (size_t delta : {1, 2, 3, 5}) {
    backend_.config().delta_bytes = delta;
    for (const std::string& t : texts)
    for (const std::string& prefix : prefixes) {
      backend_.config().reply_prefix = prefix;
      for (const std::string& extra : {std::string(), std::string(R"(,"stop":["HERE","🎉"])"),
                                       std::string(R"(,"max_tokens":4)")}) {
        for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
          const bool chat = std::string(path) == "/v1/chat/completions";
          std::string body = chat ? ChatBody(t, extra) : Body({{"prompt", t}}, extra);
          HttpResponse plain = Post(path, body);
          ASSERT_EQ(plain.status, 200) << plain.body;
          json pj = json::parse(plain.body);
          const std::string want = chat ? pj["choices"][0]["message"]["content"] : pj["choices"][0]["text"];
          body.insert(body.size() - 1, R"(,"stream":true)");
          HttpResponse streamed = Post(path, body);
          ASSERT_EQ(streamed.status, 200);
          ASSERT_TRUE(streamed.stream);
          EXPECT_EQ(streamed.content_type, "text/event-stream");
          SseBody sse = ParseSse(Drain(streamed));
          EXPECT_EQ(sse.content, want) << "delta=" << delta << " text=" << t << extra;
          EXPECT_EQ(want, SanitizeUtf8(want));
          EXPECT_EQ(sse.finish_reason, pj["choices"][0]["finish_reason"]);
          EXPECT_TRUE(sse.done);
          EXPECT_TRUE(sse.usage.is_null());
        }
      }
    }
  }
}

// logprobs: the streamed chunks' logprobs, concatenated, equal the
// non-streamed list; the tokens spell the text (FakeBackend: one token per
// delta, logprob -(i + 1), alternatives "alt<k>").
TEST_F(RouterTest, LogprobsStreamEqualsNonStream) {
  backend_.config().delta_bytes = 2;
  const std::string body = ChatBody("hello there", R"(,"logprobs":true,"top_logprobs":2)");
  json plain = json::parse(Post("/v1/chat/completions", body).body);
  EXPECT_EQ(backend_.last_request().sampling.top_logprobs, 2);
  const json& content = plain["choices"][0]["logprobs"]["content"];
  ASSERT_TRUE(content.is_array());
  std::string spelled;
  for (size_t i = 0; i < content.size(); ++i) {
    spelled += content[i]["token"].get<std::string>();
    EXPECT_EQ(content[i]["logprob"], -1.0 * double(i + 1));
    ASSERT_EQ(content[i]["top_logprobs"].size(), 2u);
    EXPECT_EQ(content[i]["top_logprobs"][1]["token"], "alt1");
    EXPECT_EQ(content[i]["bytes"].size(), content[i]["token"].get<std::string>().size());
  }
  EXPECT_EQ(spelled, plain["choices"][0]["message"]["content"]);
  std::string sbody = body;
  sbody.insert(sbody.size() - 1, R"(,"stream":true)");
  SseBody sse = ParseSse(Drain(Post("/v1/chat/completions", sbody)));
  json streamed = json::array();
  for (const json& c : sse.chunks) {
    if (c["choices"].empty() || c["choices"][0]["logprobs"].is_null()) continue;
    for (const json& t : c["choices"][0]["logprobs"]["content"]) streamed.push_back(t);
  }
  EXPECT_EQ(streamed, content);
  // Without logprobs: null, as before.
  json off = json::parse(Post("/v1/chat/completions", ChatBody("hello there")).body);
  EXPECT_TRUE(off["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(backend_.last_request().sampling.top_logprobs, -1);
  // The legacy completions shape: logprobs is the number of alternatives.
  json text = json::parse(Post("/v1/completions", Body({{"prompt", "hello there"}}, R"(,"logprobs":1)")).body);
  const json& lp = text["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());
  ASSERT_EQ(lp["tokens"].size(), lp["text_offset"].size());
  int64_t offset = 0;
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], offset);
    offset += static_cast<int64_t>(lp["tokens"][i].get<std::string>().size());
    EXPECT_EQ(lp["top_logprobs"][i].size(), 1u);
  }
  EXPECT_EQ(offset, static_cast<int64_t>(text["choices"][0]["text"].get<std::string>().size()));
}

TEST_F(RouterTest, StopStringsAndMaxTokens) {
  json j = json::parse(Post("/v1/chat/completions", ChatBody("one STOP two", R"(,"stop":"STOP")")).body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Echo: one ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(backend_.last_request().sampling.stop, std::vector<std::string>{"STOP"});
  j = json::parse(Post("/v1/chat/completions", ChatBody("abcdefghijkl", R"(,"max_tokens":2)")).body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Echo: ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST_F(RouterTest, StreamIncludeUsage) {
  HttpResponse r = Post("/v1/chat/completions",
                        ChatBody("hi", R"(,"stream":true,"stream_options":{"include_usage":true})"));
  SseBody sse = ParseSse(Drain(r));
  ASSERT_TRUE(sse.usage.is_object());
  EXPECT_EQ(sse.usage["completion_tokens"], 3);
  EXPECT_TRUE(sse.usage["agentkv"].contains("ttft_ms"));
  EXPECT_EQ(sse.chunks.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(sse.chunks.back()["choices"].empty());
  for (size_t i = 0; i + 1 < sse.chunks.size(); ++i) EXPECT_TRUE(sse.chunks[i]["usage"].is_null());
}

TEST_F(RouterTest, ClientErrorsAnsweredBeforeAnyWork) {
  ExpectError(Post("/v1/chat/completions", "{not json"), 400);
  ExpectError(Post("/v1/chat/completions", R"({"messages":[]})"), 400, "messages");
  ExpectError(Post("/v1/chat/completions", ChatBody("x", R"(,"temperature":3)")), 400, "temperature");
  ExpectError(Post("/v1/chat/completions", ChatBody("x"), {{"X-Agent-Id", "../../etc"}}), 400,
              "X-Agent-Id");
  ExpectError(Post("/v1/completions", R"({"prompt":42})"), 400, "prompt");
  ExpectError(Get("/v1/nope"), 404);
  ExpectError(Get("/v1/chat/completions"), 405);
  ExpectError(router_.Handle(Req("PUT", "/v1/models")), 405);
  backend_.config().context_tokens = 50;
  HttpResponse r = Post("/v1/chat/completions", ChatBody(std::string(100, 'x')));
  ExpectError(r, 413, "messages");
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(backend_.submitted(), 0);
  // Issue 12: refused by its size (100 bytes > 50 tokens x 1 byte), before
  // anything tokenized it.
  EXPECT_EQ(backend_.submit_calls(), 0);
  // Within the byte bound but over the context in tokens (48 + 4 >= 50): the
  // backend's one tokenization (in Submit) refuses it, as OpenAI does: 400
  // (context_overflow_test.cc has the wording per API).
  r = Post("/v1/completions", R"({"prompt":")" + std::string(50, 'y') + R"("})");
  ExpectError(r, 400, "prompt");
  r = Post("/v1/chat/completions", ChatBody(std::string(48, 'x')));
  ExpectError(r, 400, "messages");
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(backend_.submit_calls(), 2);
  EXPECT_EQ(backend_.submitted(), 0);
  // As many (empty) messages as the context has tokens cannot fit either.
  std::string many = R"({"messages":[)";
  for (int i = 0; i < 50; ++i) many += std::string(i ? "," : "") + R"({"role":"user","content":""})";
  ExpectError(Post("/v1/chat/completions", many + "]}"), 413, "messages");
  EXPECT_EQ(backend_.submit_calls(), 2);
  // ... and the router still serves.
  backend_.config().context_tokens = 4096;
  EXPECT_EQ(Post("/v1/chat/completions", ChatBody("ok")).status, 200);
}

TEST(RouterLimitsTest, BodyTooLarge) {
  FakeBackend backend;
  RouterOptions options;
  options.max_body_bytes = 64;
  Router router(&backend, ApiKeys(), options);
  ExpectError(router.Handle(Req("POST", "/v1/chat/completions", ChatBody(std::string(100, 'x')))), 413);
}

TEST_F(RouterTest, BackendRefusalsMapToStatus) {
  backend_.config().submit_status = Status::ResourceExhausted("queue full");
  HttpResponse r = Post("/v1/chat/completions", ChatBody("x"));
  ExpectError(r, 429);
  EXPECT_EQ(Header(r, "Retry-After"), "1");
  EXPECT_EQ(json::parse(r.body)["error"]["type"], "rate_limit_error");
  backend_.config().submit_status = Status::Unavailable("shutting down");
  ExpectError(Post("/v1/chat/completions", ChatBody("x", R"(,"stream":true)")), 503);
  backend_.config().submit_status = Status::FailedPrecondition("agent busy");
  ExpectError(Post("/v1/chat/completions", ChatBody("x")), 409);
  backend_.config().submit_status = Status::OK();
  // An error before the first output still gets a proper status, streaming too.
  backend_.config().error_before_start = Status::InvalidArgument("template rejected the messages");
  ExpectError(Post("/v1/chat/completions", ChatBody("x", R"(,"stream":true)")), 400);
  backend_.config().error_before_start = Status::OK();
  // A failure mid-generation: 500 when not streaming, an error event when streaming.
  backend_.config().error_after_deltas = 2;
  ExpectError(Post("/v1/chat/completions", ChatBody("long enough")), 500);
  SseBody sse = ParseSse(Drain(Post("/v1/chat/completions", ChatBody("long enough", R"(,"stream":true)"))));
  EXPECT_EQ(sse.content, "Echo: ");
  EXPECT_EQ(sse.error["type"], "server_error");
  EXPECT_FALSE(sse.done);
}

TEST(RouterAuthTest, KeysMapToIsolatedNamespaces) {
  FakeBackend backend;
  Router router(&backend, *ApiKeys::Parse({"alice:sk-a", "bob:sk-b"}));
  auto as = [](const char* key) {
    return std::vector<std::pair<std::string, std::string>>{{"Authorization", std::string("Bearer ") + key}};
  };
  HttpResponse r = router.Handle(Req("POST", "/v1/chat/completions", ChatBody("x")));
  ExpectError(r, 401);
  EXPECT_EQ(Header(r, "WWW-Authenticate"), "Bearer");
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "invalid_api_key");
  ExpectError(router.Handle(Req("POST", "/v1/chat/completions", ChatBody("x"), as("sk-c"))), 401);
  ExpectError(router.Handle(Req("GET", "/v1/agents", "", as("wrong"))), 401);
  ExpectError(router.Handle(Req("GET", "/metrics")), 403);  // no admin key configured
  EXPECT_EQ(router.Handle(Req("GET", "/health")).status, 200);  // probes need no key
  EXPECT_EQ(backend.submitted(), 0);

  ASSERT_EQ(router.Handle(Req("POST", "/v1/chat/completions", ChatBody("x", R"(,"agent_id":"shared")"),
                              as("sk-a")))
                .status,
            200);
  EXPECT_EQ(backend.last_request().namespace_id, "alice");
  json a = json::parse(router.Handle(Req("GET", "/v1/agents", "", as("sk-a"))).body);
  ASSERT_EQ(a["data"].size(), 1u);
  EXPECT_EQ(a["data"][0]["id"], "shared");
  json b = json::parse(router.Handle(Req("GET", "/v1/agents", "", as("sk-b"))).body);
  EXPECT_TRUE(b["data"].empty());
  ExpectError(router.Handle(Req("GET", "/v1/agents/shared", "", as("sk-b"))), 404);
  ExpectError(router.Handle(Req("DELETE", "/v1/agents/shared", "", as("sk-b"))), 404);
  EXPECT_EQ(router.Handle(Req("GET", "/v1/agents/shared", "", as("sk-a"))).status, 200);
}

// Issue 12: an isolated key's requests reach the backend marked isolated.
TEST(RouterAuthTest, IsolatedKeyMarksItsRequests) {
  FakeBackend backend;
  Router router(&backend, *ApiKeys::Parse({"team:sk-iso:isolated", "team:sk-open"}));
  auto as = [](const char* key) {
    return std::vector<std::pair<std::string, std::string>>{{"Authorization", std::string("Bearer ") + key}};
  };
  ASSERT_EQ(router.Handle(Req("POST", "/v1/chat/completions", ChatBody("x"), as("sk-iso"))).status, 200);
  EXPECT_EQ(backend.last_request().namespace_id, IsolatedNamespace("team", "sk-iso"));
  EXPECT_TRUE(backend.last_request().isolated);
  ASSERT_EQ(router.Handle(Req("POST", "/v1/completions", R"({"model":"m","prompt":"x"})", as("sk-iso"))).status,
            200);
  EXPECT_TRUE(backend.last_request().isolated);
  ASSERT_EQ(router.Handle(Req("POST", "/v1/chat/completions", ChatBody("x"), as("sk-open"))).status, 200);
  EXPECT_FALSE(backend.last_request().isolated);
}

// Issue 29, finding 4: an isolated key's agents, however they were
// identified (explicit id, a coding agent's session header), are invisible to
// every other key of its namespace (and to another isolated key of it): not
// listed, not readable, not deletable, and a request naming one (as itself
// or as a parent) reaches another namespace, so it can neither continue nor
// fork it. Nor does the isolated key see the namespace's other agents.
TEST(RouterAuthTest, IsolatedKeysAgentsAreInvisibleToOtherKeys) {
  FakeBackend backend;
  Router router(&backend, *ApiKeys::Parse({"team:sk-iso:isolated", "team:sk-iso2:isolated", "team:sk-open"}));
  auto as = [](const char* key, std::vector<std::pair<std::string, std::string>> more = {}) {
    more.emplace_back("Authorization", std::string("Bearer ") + key);
    return more;
  };
  ASSERT_EQ(router
                .Handle(Req("POST", "/v1/chat/completions", ChatBody("pin 4821"),
                            as("sk-iso", {{"X-Agent-Id", "secret"}})))
                .status,
            200);
  ASSERT_EQ(router.Handle(Req("POST", "/v1/messages",
                              R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"}]})",
                              as("sk-iso", {{"X-Claude-Code-Session-Id", "sess-1"}})))
                .status,
            200);
  EXPECT_EQ(backend.last_request().agent_id, "sess-1");
  ASSERT_EQ(router.Handle(Req("POST", "/v1/chat/completions", ChatBody("y"), as("sk-open", {{"X-Agent-Id", "open"}})))
                .status,
            200);
  json own = json::parse(router.Handle(Req("GET", "/v1/agents", "", as("sk-iso"))).body);
  ASSERT_EQ(own["data"].size(), 2u) << own.dump();  // its own two, not "open"
  EXPECT_EQ(router.Handle(Req("GET", "/v1/agents/secret", "", as("sk-iso"))).status, 200);
  ExpectError(router.Handle(Req("GET", "/v1/agents/open", "", as("sk-iso"))), 404);
  for (const char* other : {"sk-open", "sk-iso2"}) {
    json listed = json::parse(router.Handle(Req("GET", "/v1/agents", "", as(other))).body);
    for (const json& a : listed["data"]) EXPECT_NE(a["id"], "secret") << other;
    for (const json& a : listed["data"]) EXPECT_NE(a["id"], "sess-1") << other;
    ExpectError(router.Handle(Req("GET", "/v1/agents/secret", "", as(other))), 404);
    ExpectError(router.Handle(Req("GET", "/v1/agents/sess-1", "", as(other))), 404);
    ExpectError(router.Handle(Req("DELETE", "/v1/agents/secret", "", as(other))), 404);
    // Naming it (as itself, or as a subagent's parent) lands in another namespace.
    ASSERT_EQ(
        router.Handle(Req("POST", "/v1/chat/completions", ChatBody("pin 4"), as(other, {{"X-Agent-Id", "secret"}})))
            .status,
        200);
    EXPECT_NE(backend.last_request().namespace_id, IsolatedNamespace("team", "sk-iso")) << other;
    ASSERT_EQ(router.Handle(Req("POST", "/v1/chat/completions", ChatBody("pin 4"),
                                as(other, {{"X-Claude-Code-Session-Id", "sess-1"}, {"X-Claude-Code-Agent-Id", "sub"}})))
                  .status,
              200);
    EXPECT_EQ(backend.last_request().parent_agent_id, "sess-1");
    EXPECT_NE(backend.last_request().namespace_id, IsolatedNamespace("team", "sk-iso")) << other;
  }
  EXPECT_EQ(router.Handle(Req("GET", "/v1/agents/secret", "", as("sk-iso"))).status, 200);  // never deleted
}

// Issue 12: /metrics is server-wide, so with tenant keys it needs the admin key.
TEST(RouterAuthTest, MetricsNeedAdminKey) {
  FakeBackend backend;
  auto as = [](const char* key) {
    return std::vector<std::pair<std::string, std::string>>{{"Authorization", std::string("Bearer ") + key}};
  };
  {  // tenant keys, no admin key: closed to everyone, tenants included
    Router router(&backend, *ApiKeys::Parse({"alice:sk-a"}));
    HttpResponse r = router.Handle(Req("GET", "/metrics", "", as("sk-a")));
    ExpectError(r, 403);
    EXPECT_EQ(json::parse(r.body)["error"]["code"], "admin_key_required");
  }
  {  // tenant keys + admin key: only the admin key opens it
    Router router(&backend, *ApiKeys::Parse({"alice:sk-a"}, "sk-admin"));
    ExpectError(router.Handle(Req("GET", "/metrics", "", as("sk-a"))), 401);
    ExpectError(router.Handle(Req("GET", "/metrics")), 401);
    EXPECT_EQ(router.Handle(Req("GET", "/metrics", "", as("sk-admin"))).status, 200);
    // The admin key is not a tenant key.
    ExpectError(router.Handle(Req("GET", "/v1/agents", "", as("sk-admin"))), 401);
  }
  {  // no keys at all: open, as before
    Router router(&backend, ApiKeys());
    EXPECT_EQ(router.Handle(Req("GET", "/metrics")).status, 200);
  }
  {  // admin key only: tenants are open, metrics are not
    Router router(&backend, *ApiKeys::Parse({}, "sk-admin"));
    ExpectError(router.Handle(Req("GET", "/metrics")), 401);
    EXPECT_EQ(router.Handle(Req("GET", "/metrics", "", as("sk-admin"))).status, 200);
  }
  EXPECT_FALSE(ApiKeys::Parse({"alice:sk-a"}, "sk-a").ok());
}

// Issue 12: one tenant cannot fill the queue; others are still served.
TEST(RouterTenantTest, PerTenantCapIs429) {
  FakeBackend backend;
  backend.config().delay_ms = 20;
  RouterOptions options;
  options.max_requests_per_tenant = 2;
  Router router(&backend, *ApiKeys::Parse({"alice:sk-a", "bob:sk-b"}), options);
  auto as = [](const char* key) {
    return std::vector<std::pair<std::string, std::string>>{{"Authorization", std::string("Bearer ") + key}};
  };
  const std::string body = ChatBody("a long enough message", R"(,"stream":true)");
  HttpResponse a1 = router.Handle(Req("POST", "/v1/chat/completions", body, as("sk-a")));
  HttpResponse a2 = router.Handle(Req("POST", "/v1/chat/completions", body, as("sk-a")));
  ASSERT_EQ(a1.status, 200);
  ASSERT_EQ(a2.status, 200);
  HttpResponse a3 = router.Handle(Req("POST", "/v1/chat/completions", body, as("sk-a")));
  ExpectError(a3, 429);
  EXPECT_EQ(Header(a3, "Retry-After"), "1");
  EXPECT_EQ(backend.submit_calls(), 2);  // refused before the backend
  HttpResponse b1 = router.Handle(Req("POST", "/v1/chat/completions", body, as("sk-b")));
  EXPECT_EQ(b1.status, 200);
  a1 = HttpResponse();  // the stream ends (dropped): alice has a slot again
  HttpResponse a4 = router.Handle(Req("POST", "/v1/chat/completions", ChatBody("x"), as("sk-a")));
  EXPECT_EQ(a4.status, 200);  // non-streamed: released when answered
  HttpResponse a5 = router.Handle(Req("POST", "/v1/chat/completions", ChatBody("x"), as("sk-a")));
  EXPECT_EQ(a5.status, 200);
}

TEST_F(RouterTest, AdminRoutes) {
  AgentInfo info;
  info.id = "planner";
  info.tier = CacheState::kHot;
  info.tokens = 1000;
  info.ram_bytes = 4096;
  backend_.AddAgent("default", info);
  info.id = "busy-one";
  info.busy = true;
  backend_.AddAgent("default", info);

  json list = json::parse(Get("/v1/agents").body);
  ASSERT_EQ(list["data"].size(), 2u);
  HttpResponse r = Get("/v1/agents/planner");
  ASSERT_EQ(r.status, 200);
  json one = json::parse(r.body);
  EXPECT_EQ(one["tier"], "hot");
  EXPECT_EQ(one["tokens"], 1000);
  EXPECT_EQ(one["bytes"], 4096);
  ExpectError(Get("/v1/agents/../secrets"), 400, "agent_id");
  ExpectError(Get("/v1/agents/a/b"), 400);
  ExpectError(Get("/v1/agents/.hidden"), 400);
  ExpectError(Get("/v1/agents/ghost"), 404);

  HttpRequest del = Req("DELETE", "/v1/agents/planner");
  del.query.emplace("evict_only", "maybe");
  ExpectError(router_.Handle(del), 400, "evict_only");
  del.query.clear();
  del.query.emplace("evict_only", "true");
  r = router_.Handle(del);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["evicted"], true);
  EXPECT_EQ(json::parse(Get("/v1/agents/planner").body)["tier"], "warm");
  r = router_.Handle(Req("DELETE", "/v1/agents/planner"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["deleted"], true);
  ExpectError(Get("/v1/agents/planner"), 404);
  ExpectError(router_.Handle(Req("DELETE", "/v1/agents/busy-one")), 409);
}

TEST_F(RouterTest, MetricsCombineBackendAndHttp) {
  Post("/v1/chat/completions", ChatBody("x"));
  Post("/v1/chat/completions", "{");
  HttpResponse r = Get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type.rfind("text/plain", 0), 0u);
  EXPECT_NE(r.body.find("agentkv_requests_total 1"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"(agentkv_http_requests_total{route="chat_completions",code="200"} 1)"),
            std::string::npos);
  EXPECT_NE(r.body.find(R"(agentkv_http_requests_total{route="chat_completions",code="400"} 1)"),
            std::string::npos);
}

TEST_F(RouterTest, NonStreamDisconnectCancels) {
  backend_.config().delay_ms = 20;
  backend_.config().repeat = 200;  // would take ~10 s
  HttpRequest req = Req("POST", "/v1/chat/completions", ChatBody("slow"));
  const auto gone_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(150);
  req.client_gone = [gone_at] { return std::chrono::steady_clock::now() > gone_at; };
  const auto t0 = std::chrono::steady_clock::now();
  HttpResponse r = router_.Handle(req);
  EXPECT_EQ(r.status, 499);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  backend_.JoinAll();
  EXPECT_EQ(backend_.cancelled(), 1);
  EXPECT_EQ(backend_.finished(), 0);
}

TEST_F(RouterTest, StreamDroppedCancels) {
  backend_.config().delay_ms = 20;
  backend_.config().repeat = 200;
  HttpResponse r = Post("/v1/chat/completions", ChatBody("slow", R"(,"stream":true)"));
  ASSERT_TRUE(r.stream);
  std::string got;
  while (got.size() < 1000) r.stream->Read(std::chrono::milliseconds(50), &got);
  r.stream.reset();  // the adapter drops the stream when the client goes away
  backend_.JoinAll();
  EXPECT_EQ(backend_.cancelled(), 1);
}

TEST_F(RouterTest, ConcurrentRequests) {
  backend_.config().delay_ms = 1;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      const std::string user = "agent " + std::to_string(i) + " says ü";
      const std::string extra = i % 2 ? R"(,"stream":true)" : "";
      HttpResponse r = router_.Handle(Req("POST", "/v1/chat/completions", ChatBody(user, extra),
                                          {{"X-Agent-Id", "a" + std::to_string(i)}}));
      const std::string content = r.stream ? ParseSse(Drain(r)).content
                                           : json::parse(r.body)["choices"][0]["message"]["content"].get<std::string>();
      if (content == "Echo: " + user) ok.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
}

}  // namespace
}  // namespace agentkv::api
