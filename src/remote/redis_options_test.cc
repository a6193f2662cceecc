#include "remote/redis_options.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

namespace agentkv {
namespace {

TEST(RedisOptions, ParsesHostPortDbAndCredentials) {
  auto o = ParseRedisUrl("redis://alice:s%40cret@cache.local:6380/3");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->host, "cache.local");
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->db, 3);
  EXPECT_EQ(o->user, "alice");
  EXPECT_EQ(o->password, "s@cret");
  EXPECT_EQ(DescribeRedis(*o), "redis://cache.local:6380/3");  // no credentials

  auto d = ParseRedisUrl("redis://127.0.0.1");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->port, 6379);
  EXPECT_EQ(d->db, 0);
  EXPECT_TRUE(d->password.empty());

  auto p = ParseRedisUrl("redis://:pw@[::1]:7000/");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->host, "::1");
  EXPECT_EQ(p->port, 7000);
  EXPECT_EQ(p->password, "pw");
  EXPECT_TRUE(p->user.empty());
}

TEST(RedisOptions, RejectsBadUrls) {
  for (const char* bad : {"http://x:1", "rediss://x:1", "redis://", "redis://host:0", "redis://host:99999",
                          "redis://host:12ab", "redis://host/db", "redis://u:%zz@host", "redis://[::1"}) {
    auto o = ParseRedisUrl(bad);
    EXPECT_FALSE(o.ok()) << bad;
    if (!o.ok()) EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(RedisOptions, PasswordFromFileThenEnv) {
  const std::string path = "/tmp/issue14-redis-pwfile-" + std::to_string(getpid());
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("from-file\n", f);
  std::fclose(f);
  RedisOptions o;
  o.password = "from-url";
  ASSERT_TRUE(LoadRedisPassword(path, &o).ok());
  EXPECT_EQ(o.password, "from-file");
  std::remove(path.c_str());
  EXPECT_EQ(LoadRedisPassword(path, &o).code(), StatusCode::kInvalidArgument);

  setenv("AGENTKV_REMOTE_PASSWORD", "from-env", 1);
  ASSERT_TRUE(LoadRedisPassword("", &o).ok());
  EXPECT_EQ(o.password, "from-env");
  unsetenv("AGENTKV_REMOTE_PASSWORD");
}

}  // namespace
}  // namespace agentkv
