// The subcommands' flag parser, list splitting and the key flags.
#include "cli/flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "cli/key_flags.h"

namespace agentkv::cli {
namespace {

TEST(FlagsTest, LongShortBooleanPositionalAndUnknown) {
  const char* argv[] = {"serve", "--port", "8080", "-t", "2", "--verbose", "file.txt", "--bogus", "x"};
  Flags f(9, const_cast<char**>(argv), {"verbose"});
  EXPECT_EQ(f.GetOr("port", "", "0"), "8080");
  EXPECT_EQ(f.Get("threads", "t").value_or(""), "2");
  EXPECT_TRUE(f.Has("verbose"));
  ASSERT_EQ(f.positional().size(), 1u);
  EXPECT_EQ(f.positional()[0], "file.txt");
  EXPECT_EQ(f.Unknown({"port", "threads", "t", "verbose"}), std::vector<std::string>{"bogus"});
  long long n = 0;
  std::string err;
  EXPECT_TRUE(f.GetInt("port", "", 1, &n, &err));
  EXPECT_EQ(n, 8080);
  const char* bad[] = {"x", "--port", "80a"};
  Flags g(3, const_cast<char**>(bad));
  EXPECT_FALSE(g.GetInt("port", "", 1, &n, &err));
  EXPECT_FALSE(err.empty());
}

TEST(FlagsTest, SplitCommaListKeepsEmptyItems) {
  EXPECT_EQ(SplitCommaList("q4_0,q8_0,f16"), (std::vector<std::string>{"q4_0", "q8_0", "f16"}));
  EXPECT_EQ(SplitCommaList("1024"), std::vector<std::string>{"1024"});
  EXPECT_EQ(SplitCommaList("a,,b,"), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(SplitCommaList(""), std::vector<std::string>{""});
}

// Issue 29 finding 9: "--admin-key" last took "1" as the admin key.
TEST(FlagsTest, FlagWithoutItsValueIsAnError) {
  const char* last[] = {"serve", "--port", "80", "--admin-key"};
  Flags f(4, const_cast<char**>(last));
  EXPECT_NE(f.error().find("--admin-key needs a value"), std::string::npos) << f.error();
  EXPECT_FALSE(f.Get("admin-key").has_value());
  // The next flag is not a value either ("--api-key --port 80").
  const char* next[] = {"serve", "--api-key", "--port", "80"};
  Flags g(4, const_cast<char**>(next));
  EXPECT_NE(g.error().find("--api-key needs a value"), std::string::npos) << g.error();
  EXPECT_EQ(g.GetOr("port", "", ""), "80");
  // Booleans, negative numbers and "--name=" are fine.
  const char* ok[] = {"serve", "--no-warmup", "--gpu-layers", "-1", "--admin-key=", "--help"};
  Flags h(6, const_cast<char**>(ok), {"no-warmup", "help"});
  EXPECT_EQ(h.error(), "");
  EXPECT_EQ(h.GetOr("gpu-layers", "", ""), "-1");
  EXPECT_EQ(h.Get("admin-key").value_or("unset"), "");
  EXPECT_TRUE(h.Has("help"));
}

class KeyFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("AGENTKV_API_KEY");
    ::unsetenv("AGENTKV_ADMIN_KEY");
    ::unsetenv("AGENTKV_API_KEY_FILE");
  }
  void TearDown() override { SetUp(); }

  // Parses `args` (after a subcommand name); the keys on success.
  bool Parse(std::vector<std::string> args, std::vector<std::string>* keys, std::string* admin, std::string* err) {
    std::vector<char*> argv;
    std::string cmd = "serve";
    argv.push_back(cmd.data());
    for (auto& a : args) argv.push_back(a.data());
    Flags flags(static_cast<int>(argv.size()), argv.data());
    EXPECT_EQ(flags.error(), "");
    return ParseKeyFlags(flags, keys, admin, err);
  }
};

// Issue 29 finding 9: a repeated --api-key kept only the last key.
TEST_F(KeyFlagsTest, RepeatedApiKeyKeepsEveryKey) {
  std::vector<std::string> keys;
  std::string admin, err;
  ASSERT_TRUE(Parse({"--api-key", "alice:k1", "--api-key", "bob:k2,carol:k3 ", "--admin-key", "adm"}, &keys, &admin,
                    &err))
      << err;
  EXPECT_EQ(keys, (std::vector<std::string>{"alice:k1", "bob:k2", "carol:k3"}));
  EXPECT_EQ(admin, "adm");
}

// Issue 29 finding 9: these ran the server with no authentication at all.
TEST_F(KeyFlagsTest, EmptyKeysAreRefused) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--api-key", " , "}, {"--api-key="}, {"--api-key", "a,,b"}, {"--api-key", "a", "--api-key", " "},
           {"--admin-key", " "}}) {
    std::vector<std::string> keys;
    std::string admin, err;
    EXPECT_FALSE(Parse(args, &keys, &admin, &err)) << args[0] << " " << (args.size() > 1 ? args[1] : "");
    EXPECT_NE(err.find("empty"), std::string::npos) << err;
  }
}

TEST_F(KeyFlagsTest, EmptyKeyFromTheEnvironmentIsRefused) {
  std::vector<std::string> keys;
  std::string admin, err;
  ::setenv("AGENTKV_API_KEY", "", 1);
  EXPECT_FALSE(Parse({}, &keys, &admin, &err));
  EXPECT_NE(err.find("empty"), std::string::npos) << err;
  ::setenv("AGENTKV_API_KEY", "k1,k2", 1);
  ASSERT_TRUE(Parse({}, &keys, &admin, &err)) << err;
  EXPECT_EQ(keys, (std::vector<std::string>{"k1", "k2"}));
  ::setenv("AGENTKV_ADMIN_KEY", "", 1);
  EXPECT_FALSE(Parse({}, &keys, &admin, &err));
}

TEST_F(KeyFlagsTest, KeyFileSkipsBlankLinesAndRefusesAnEmptyFile) {
  const std::string path = ::testing::TempDir() + "/agentkv_keys_" + std::to_string(::getpid());
  std::ofstream(path) << "k1, k2\n\n  \nk3\n";
  std::vector<std::string> keys;
  std::string admin, err;
  ASSERT_TRUE(Parse({"--api-key-file", path}, &keys, &admin, &err)) << err;
  EXPECT_EQ(keys, (std::vector<std::string>{"k1", "k2", "k3"}));
  std::ofstream(path) << "\n \n";
  EXPECT_FALSE(Parse({"--api-key-file", path}, &keys, &admin, &err));
  EXPECT_NE(err.find("no key"), std::string::npos) << err;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace agentkv::cli
