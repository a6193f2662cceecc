#include "util/log.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace agentkv {
namespace {

TEST(EscapeForLogTest, ControlBytesCannotForgeLines) {
  EXPECT_EQ(EscapeForLog("/v1/x\r\nagentkv error: forged"), "/v1/x\\x0d\\x0aagentkv error: forged");
  EXPECT_EQ(EscapeForLog(std::string("a\0b\x1b[31m\x7f", 9)), "a\\x00b\\x1b[31m\\x7f");
  EXPECT_EQ(EscapeForLog("back\\slash"), "back\\\\slash");
  EXPECT_EQ(EscapeForLog("\xc3\xa9"), "\\xc3\\xa9");
  EXPECT_EQ(EscapeForLog("plain /v1/chat/completions"), "plain /v1/chat/completions");
}

TEST(EscapeForLogTest, Truncates) {
  EXPECT_EQ(EscapeForLog(std::string(10000, 'a'), 4), "aaaa...(10000 bytes)");
}

// The logger itself keeps one event on one line whatever the arguments.
TEST(LogFTest, NewlinesInArgumentsStayOnOneLine) {
  testing::internal::CaptureStderr();
  LogF(LogLevel::kError, "path %s", "/x\nagentkv error: forged\r");
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "agentkv error: path /x\\x0aagentkv error: forged\\x0d\n");
}

}  // namespace
}  // namespace agentkv
