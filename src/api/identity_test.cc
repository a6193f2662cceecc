#include "api/identity.h"

#include <gtest/gtest.h>

namespace agentkv::api {
namespace {

TEST(IdentityTest, AcceptsSafeIds) {
  for (const char* id : {"a", "agent-1", "Planner_2.v3", "x..y", "0"}) {
    EXPECT_TRUE(ValidateAgentId(id, "id").ok()) << id;
  }
  EXPECT_TRUE(ValidateAgentId(std::string(128, 'a'), "id").ok());
}

TEST(IdentityTest, RefusesUnsafeIds) {
  for (const char* id : {"", ".", "..", ".hidden", "../etc", "a/b", "a\\b", "a b", "ü", "a\n",
                         "%2e%2e"}) {
    Status st = ValidateAgentId(id, "X-Agent-Id");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << id;
    EXPECT_NE(st.message().find("X-Agent-Id"), std::string::npos);
  }
  EXPECT_FALSE(ValidateAgentId(std::string(129, 'a'), "id").ok());
  EXPECT_FALSE(ValidateAgentId(std::string("a\0b", 3), "id").ok());
}

}  // namespace
}  // namespace agentkv::api
