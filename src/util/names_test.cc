#include "util/names.h"

#include <gtest/gtest.h>

#include <string>

namespace agentkv {
namespace {

TEST(NamesTest, AcceptsSafeNames) {
  for (const char* name : {"a", "agent-1", "Planner_2.v3", "A.b_c-9", "x..y", "0"}) {
    EXPECT_TRUE(ValidateName("id", name).ok()) << name;
  }
  EXPECT_TRUE(ValidateName("id", std::string(128, 'a')).ok());
}

TEST(NamesTest, RefusesUnsafeNames) {
  for (std::string bad : {std::string(""), std::string("."), std::string(".."), std::string(".hidden"),
                          std::string("../etc"), std::string("a/b"), std::string("a\\b"), std::string("a b"),
                          std::string("\xc3\xbc"), std::string("a\n"), std::string("%2e%2e"),
                          std::string("a\0b", 3), std::string(129, 'a'), std::string(10240, 'x')}) {
    Status st = ValidateName("X-Agent-Id", bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad.substr(0, 20);
    EXPECT_EQ(st.message().rfind("X-Agent-Id: ", 0), 0u) << st.message();
    EXPECT_LT(st.message().size(), 160u);  // a 10 KB id is not echoed back
  }
}

TEST(NamesTest, MessageNeverEchoesRawBytes) {
  Status st = ValidateName("agent id", "a\nb\x1b[31m");
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\x1b'), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("a?b?"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace agentkv
