// RedisRemoteStore against a real redis-server started by the test.
#include "remote/redis_remote_store.h"

#include <gtest/gtest.h>

#include "remote/redis_test_server.h"

namespace agentkv {
namespace {

using remote_test::RedisTestServer;

#define REQUIRE_REDIS()                                                        \
  if (!RedisTestServer::Available()) GTEST_SKIP() << "redis-server not installed"

RedisOptions OptionsFor(const RedisTestServer& server) {
  auto o = ParseRedisUrl(server.url());
  EXPECT_TRUE(o.ok());
  o->retry_after_ms = 50;
  return *o;
}

const RemoteScope kScope{"fp0123456789abcdef", "tenant-a"};

TEST(RedisRemoteStore, BlocksAreWrittenOnceAndReadBackInOrder) {
  REQUIRE_REDIS();
  RedisTestServer server;
  ASSERT_TRUE(server.Start());
  RedisRemoteStore store(OptionsFor(server));
  ASSERT_TRUE(store.Ping().ok());

  std::vector<std::pair<std::string, std::string_view>> blocks;
  std::vector<std::string> ids, payloads;
  for (int i = 0; i < 10; ++i) {
    ids.push_back(std::string(31, 'a') + static_cast<char>('0' + i));
    payloads.push_back(std::string(1000 + i, static_cast<char>('A' + i)) + std::string(1, '\0') + "tail");
  }
  for (int i = 0; i < 10; i += 2) blocks.emplace_back(ids[i], payloads[i]);
  auto n = store.PutBlocksIfAbsent(kScope, blocks);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 5u);

  // SET NX: a second put of other bytes under the same id changes nothing.
  std::vector<std::pair<std::string, std::string_view>> again = {{ids[0], "other bytes"}};
  auto n2 = store.PutBlocksIfAbsent(kScope, again);
  ASSERT_TRUE(n2.ok());
  EXPECT_EQ(*n2, 0u);

  auto exist = store.BlocksExist(kScope, ids);
  ASSERT_TRUE(exist.ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ((*exist)[i], i % 2 == 0) << i;

  auto got = store.GetBlocks(kScope, ids);  // spread over parallel connections
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 10u);
  for (int i = 0; i < 10; ++i) {
    if (i % 2 == 0) {
      ASSERT_TRUE((*got)[i].has_value()) << i;
      EXPECT_EQ(*(*got)[i], payloads[i]) << i;  // binary-safe, in order
    } else {
      EXPECT_FALSE((*got)[i].has_value()) << i;
    }
  }
  ASSERT_TRUE(store.DeleteBlocks(kScope, std::span<const std::string>(ids.data(), 2)).ok());
  auto after = store.BlocksExist(kScope, std::span<const std::string>(ids.data(), 1));
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE((*after)[0]);
}

TEST(RedisRemoteStore, ManifestVersionsNeverGoBackwards) {
  REQUIRE_REDIS();
  RedisTestServer server;
  ASSERT_TRUE(server.Start());
  RedisRemoteStore store(OptionsFor(server));
  auto none = store.GetManifest(kScope, "agent-1");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  auto put = [&](uint64_t v, const std::string& bytes) {
    auto r = store.PutManifestIfNewer(kScope, "agent-1", v, bytes);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && *r;
  };
  EXPECT_TRUE(put(1700000000123, "v123"));
  EXPECT_FALSE(put(1700000000122, "older"));
  EXPECT_FALSE(put(1700000000123, "same version"));
  EXPECT_TRUE(put(1700000000124, "v124"));
  // 64-bit versions compare exactly (beyond a double's 53 bits).
  EXPECT_TRUE(put(18446744073709551614ull, "max-1"));
  EXPECT_FALSE(put(18446744073709551613ull, "max-2"));
  auto m = store.GetManifest(kScope, "agent-1");
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ((*m)->version, 18446744073709551614ull);
  EXPECT_EQ((*m)->bytes, "max-1");

  auto list = store.ListManifests(kScope);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  ASSERT_TRUE(store.DeleteManifest(kScope, "agent-1").ok());
  auto gone = store.GetManifest(kScope, "agent-1");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TEST(RedisRemoteStore, ScopesShareNoKeys) {
  REQUIRE_REDIS();
  RedisTestServer server;
  ASSERT_TRUE(server.Start());
  RedisRemoteStore store(OptionsFor(server));
  const RemoteScope other_tenant{kScope.fingerprint, "tenant-b"};
  const RemoteScope other_model{"fffffffffffffffffff", kScope.ns};
  const std::string id(32, 'c');
  std::vector<std::pair<std::string, std::string_view>> b = {{id, "bytes"}};
  ASSERT_TRUE(store.PutBlocksIfAbsent(kScope, b).ok());
  ASSERT_TRUE(store.PutManifestIfNewer(kScope, "agent", 5, "m").ok());
  for (const auto& scope : {other_tenant, other_model}) {
    auto got = store.GetBlocks(scope, std::span<const std::string>(&id, 1));
    ASSERT_TRUE(got.ok());
    EXPECT_FALSE((*got)[0].has_value());
    auto m = store.GetManifest(scope, "agent");
    ASSERT_TRUE(m.ok());
    EXPECT_FALSE(m->has_value());
    // A lower version in another scope is its own agent.
    auto put = store.PutManifestIfNewer(scope, "agent", 1, "m1");
    ASSERT_TRUE(put.ok());
    EXPECT_TRUE(*put);
  }
  EXPECT_NE(RedisRemoteStore::BlockKey(kScope, id), RedisRemoteStore::BlockKey(other_tenant, id));
  // The tenant's name never appears in a key in clear.
  EXPECT_EQ(RedisRemoteStore::ManifestKey(kScope, "agent").find("tenant-a"), std::string::npos);
}

TEST(RedisRemoteStore, AuthWithPassword) {
  REQUIRE_REDIS();
  RedisTestServer server("s3cret");
  ASSERT_TRUE(server.Start());
  RedisOptions o = OptionsFor(server);
  RedisRemoteStore anonymous(o);
  Status s = anonymous.Ping();
  EXPECT_FALSE(s.ok());
  o.password = "wrong";
  EXPECT_FALSE(RedisRemoteStore(o).Ping().ok());
  o.password = "s3cret";
  RedisRemoteStore good(o);
  EXPECT_TRUE(good.Ping().ok());
  auto m = good.GetManifest(kScope, "a");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
}

TEST(RedisRemoteStore, OutageIsUnavailableAndRecovers) {
  REQUIRE_REDIS();
  RedisTestServer server;
  ASSERT_TRUE(server.Start());
  RedisRemoteStore store(OptionsFor(server));
  ASSERT_TRUE(store.PutManifestIfNewer(kScope, "a", 1, "m").ok());
  server.Stop();
  auto down = store.GetManifest(kScope, "a");  // a pooled connection, now dead
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  auto down2 = store.GetManifest(kScope, "a");  // dial fails
  ASSERT_FALSE(down2.ok());
  EXPECT_EQ(down2.status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(server.Start());  // empty again: nothing persisted
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // past retry_after_ms
  auto back = store.GetManifest(kScope, "a");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->has_value());
}

TEST(RedisRemoteStore, NothingListeningFailsFast) {
  RedisOptions o;
  o.host = "127.0.0.1";
  o.port = remote_test::FreePort();
  RedisRemoteStore store(o);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(store.GetManifest(kScope, "a").status().code(), StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
}

}  // namespace
}  // namespace agentkv
