#include "store/cache_admin.h"

#include <gtest/gtest.h>

#include "store/mem_file_system.h"
#include "store/store_ids.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT

class CacheAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* fp : {kFp, "fp-second"}) {
      AgentStoreOptions o = Options(&mem_);
      o.fingerprint = fp;
      auto s = AgentStore::Open(o);
      ASSERT_TRUE(s.ok());
      ASSERT_TRUE(Save(s->get(), "ns1", "a", MakeTokens(300, 1)).ok());
      ASSERT_TRUE(Save(s->get(), "ns2", "b", MakeTokens(20, 2)).ok());
    }
    ASSERT_TRUE(mem_.CreateDirs("/cache/not a fingerprint").ok());
  }
  CacheQuery Q(std::string ns = "", std::string agent = "") { return {&mem_, "/cache", ns, agent}; }
  MemFileSystem mem_;
};

TEST_F(CacheAdminTest, ListAndShow) {
  auto fps = ListCacheFingerprints(&mem_, "/cache");
  ASSERT_TRUE(fps.ok());
  EXPECT_EQ(*fps, (std::vector<std::string>{"fp-second", std::string(kFp)}));  // '-' < '0'
  auto before = mem_.AllFiles();
  auto rows = CacheList(Q());
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0].fingerprint, "fp-second");
  EXPECT_EQ((*rows)[0].summary.ns, "ns1");
  EXPECT_EQ((*rows)[0].summary.agent_id, "a");
  EXPECT_EQ((*rows)[0].summary.n_tokens, 300u);
  EXPECT_EQ((*rows)[0].summary.n_blocks, 2u);
  EXPECT_GT((*rows)[0].summary.block_bytes, 0u);
  EXPECT_EQ(CacheList(Q("ns2"))->size(), 2u);
  auto show = CacheShow(Q("ns1", "a"));
  ASSERT_TRUE(show.ok());
  ASSERT_EQ(show->size(), 2u);
  EXPECT_EQ((*show)[0].record.tokens, MakeTokens(300, 1));
  EXPECT_EQ(CacheShow(Q("", "zz")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(CacheShow(Q("", "../x")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mem_.AllFiles(), before);  // read-only
}

TEST_F(CacheAdminTest, VerifyAndRemove) {
  const std::string block = "/cache/" + std::string(kFp) + "/" + NameHash("ns1") + "/blocks/" +
                            ComputeBlockIds(kFp, MakeTokens(300, 1))[1] + ".safetensors";
  ASSERT_TRUE(mem_.CorruptFile(block, "junk").ok());
  auto v = CacheVerify(Q(), /*repair=*/false);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 4u);
  for (const auto& row : *v) {
    bool damaged = row.fingerprint == kFp && row.report.agent_id == "a";
    EXPECT_EQ(row.report.ok(), !damaged) << row.fingerprint << " " << row.report.agent_id;
    if (damaged) EXPECT_EQ(row.report.valid_tokens, 256u);
  }
  EXPECT_TRUE(mem_.Exists(block));  // not repaired
  v = CacheVerify(Q("ns1", "a"), /*repair=*/true);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->size(), 2u);
  EXPECT_FALSE(mem_.Exists(block));  // quarantined

  auto n = CacheRemove(Q("", "a"));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(CacheList(Q())->size(), 2u);
  EXPECT_EQ(CacheRemove(Q("", "a")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(CountFiles(mem_, "/quarantine/"), 0u);  // erasure covers quarantined copies
  EXPECT_EQ(CacheRemove(Q()).status().code(), StatusCode::kInvalidArgument);  // agent required
}

// Beside a running server (a writable store holding the lock): ls/show/verify
// read its cache without changing a file; rm and verify --repair refuse and
// touch nothing.
TEST_F(CacheAdminTest, LiveCacheIsReadOnlyForTheCli) {
  const std::string block = "/cache/" + std::string(kFp) + "/" + NameHash("ns1") + "/blocks/" +
                            ComputeBlockIds(kFp, MakeTokens(300, 1))[1] + ".safetensors";
  ASSERT_TRUE(mem_.CorruptFile(block, "junk").ok());
  auto in_use = CacheInUse(&mem_, "/cache");
  ASSERT_TRUE(in_use.ok());
  EXPECT_FALSE(*in_use);
  auto server = AgentStore::Open(Options(&mem_));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  in_use = CacheInUse(&mem_, "/cache");
  ASSERT_TRUE(in_use.ok());
  EXPECT_TRUE(*in_use);
  const auto before = mem_.AllFiles();

  auto rows = CacheList(Q());
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->size(), 4u);
  EXPECT_TRUE(CacheShow(Q("ns1", "a")).ok());
  auto v = CacheVerify(Q("ns1", "a"), /*repair=*/false);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->size(), 2u);

  auto repair = CacheVerify(Q("ns1", "a"), /*repair=*/true);
  EXPECT_EQ(repair.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(repair.status().message().find("cache verify --repair: refused: a running agentkv server holds"),
            std::string::npos)
      << repair.status().ToString();
  auto rm = CacheRemove(Q("", "a"));
  EXPECT_EQ(rm.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(rm.status().message().find("cache rm: refused"), std::string::npos) << rm.status().ToString();
  EXPECT_EQ(mem_.AllFiles(), before);
  EXPECT_TRUE(mem_.Exists(block));  // not quarantined under the server

  server->reset();
  auto n = CacheRemove(Q("", "a"));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2u);
}

}  // namespace
}  // namespace agentkv
