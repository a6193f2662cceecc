#include "api/errors.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/api_test_util.h"
#include "api/fake_backend.h"

namespace agentkv::api {
namespace {

using testing::Req;

// Issue 30: a prompt over the context is OpenAI's 400 context_length_exceeded,
// its numbers taken from the Status's quantity, not from its message.
TEST(ApiErrorTest, PromptOverTheContextIsOpenAisError) {
  const ApiError e =
      ApiErrorFromStatus(Status::OutOfRange("whatever").WithQuantity({9000, 8192}).WithContext("submit"), "messages");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.param, "messages");
  EXPECT_EQ(e.message, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 "
                       "tokens. Please reduce the length of the messages.");
  ASSERT_TRUE(e.context_overflow.has_value());
  EXPECT_EQ(e.context_overflow->prompt_tokens, 9000);
  EXPECT_EQ(e.context_overflow->context_tokens, 8192);
  // Without numbers: the same status and code, the Status's own message.
  const ApiError bare = ApiErrorFromStatus(Status::OutOfRange("too long"), "prompt");
  EXPECT_EQ(bare.http_status, 400);
  EXPECT_EQ(bare.code, "context_length_exceeded");
  EXPECT_EQ(bare.message, "too long");
  EXPECT_FALSE(bare.context_overflow.has_value());
}

// Issue 12: store paths and OS details stay in the log.
TEST(ApiErrorTest, InternalErrorsAreGeneric) {
  for (const Status& st : {Status::IOError("write /var/cache/agentkv/ns/3f2a.tmp: No space left on device"),
                           Status::Corruption("manifest /home/u/.cache/agentkv/x.json: checksum mismatch"),
                           Status::Internal("slot 3 state: /tmp/agentkv-secret")}) {
    ::testing::internal::CaptureStderr();
    ApiError e = ApiErrorFromStatus(st);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(e.http_status, 500);
    EXPECT_EQ(e.code, "internal_error");
    EXPECT_EQ(e.message.find('/'), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("reference "), std::string::npos);
    // The detail is logged under the reference the client sees.
    const std::string ref = e.message.substr(e.message.find("reference ") + 10, 12);
    EXPECT_NE(log.find(ref), std::string::npos) << log;
    EXPECT_NE(log.find(st.message()), std::string::npos) << log;
  }
}

TEST(ApiErrorTest, PathsRedactedFromClientErrors) {
  ApiError e = ApiErrorFromStatus(Status::NotFound("read /cache/ns/abc.json: no such file"));
  EXPECT_EQ(e.http_status, 404);
  EXPECT_EQ(e.message, "read <path>: no such file");
  EXPECT_EQ(RedactPaths("open \"/a/b c\" (=/x/y) done"), "open \"<path> c\" (=<path>) done");
  EXPECT_EQ(RedactPaths("'temperature' must be in [0, 2]."), "'temperature' must be in [0, 2].");
  EXPECT_EQ(RedactPaths("a/b stays"), "a/b stays");
}

// Through the router: a backend failure carrying a path reaches the client
// as a generic 500.
TEST(ApiErrorTest, RouterDoesNotLeakBackendPaths) {
  FakeBackend backend;
  backend.config().submit_status = Status::IOError("open /srv/agentkv/cache/default/x.tmp: EIO");
  Router router(&backend, ApiKeys());
  ::testing::internal::CaptureStderr();
  HttpResponse r = router.Handle(Req("POST", "/v1/chat/completions",
                                     R"({"messages":[{"role":"user","content":"hi"}]})"));
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body.find("/srv"), std::string::npos) << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], "internal_error");
}

}  // namespace
}  // namespace agentkv::api
