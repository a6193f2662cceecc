// SaveAgent never moves an agent's on-disk version backwards: a save of an
// older version (a late write-behind), or of the same version with other
// content, is refused before any file is touched.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "store/agent_store.h"
#include "store/manifest.h"
#include "store/mem_file_system.h"
#include "store/store_ids.h"
#include "store/store_test_util.h"
#include "util/hash.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT

class SaveVersionTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    store_.reset();
    auto s = AgentStore::Open(Options(&mem_));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  Result<SaveResult> SaveVersion(const std::vector<int32_t>& tokens, uint64_t version, int* calls = nullptr) {
    AgentRecord r = MakeRecord("a", tokens);
    r.version = version;
    return store_->SaveAgent("ns", r, ProviderFor(tokens, calls));
  }

  MemFileSystem mem_;
  std::unique_ptr<AgentStore> store_;
};

const std::vector<int32_t> kOld = MakeTokens(600, 1);
const std::vector<int32_t> kNew = MakeTokens(700, 2);  // no block in common with kOld

TEST_F(SaveVersionTest, UnversionedSavesGetTheNextVersion) {
  auto r = SaveVersion(kOld, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->record.version, 1u);
  r = SaveVersion(kNew, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->record.version, 2u);
  Open();
  EXPECT_EQ(store_->GetRecord("ns", "a")->version, 2u);
  EXPECT_EQ(store_->GetSummary("ns", "a")->version, 2u);
  r = SaveVersion(kOld, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->record.version, 3u);
}

TEST_F(SaveVersionTest, OlderVersionIsRefusedAndDeletesNothing) {
  ASSERT_TRUE(SaveVersion(kOld, 5).ok());
  ASSERT_TRUE(SaveVersion(kNew, 7).ok());  // versions may skip
  const auto files = mem_.AllFiles();
  int calls = 0;
  auto stale = SaveVersion(kOld, 6, &calls);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.status().message().find("stale save: version 6 is older than version 7 on disk"),
            std::string::npos)
      << stale.status().ToString();
  EXPECT_EQ(calls, 0);                 // no block was even asked for
  EXPECT_EQ(mem_.AllFiles(), files);   // nothing written, nothing collected
  EXPECT_TRUE(LoadsExactly(store_.get(), "ns", "a", kNew));
  EXPECT_EQ(store_->GetRecord("ns", "a")->version, 7u);
  mem_.SimulateCrash();
  Open();
  EXPECT_TRUE(LoadsExactly(store_.get(), "ns", "a", kNew));
  EXPECT_EQ(SaveVersion(kOld, 1).status().code(), StatusCode::kFailedPrecondition);
  auto newer = SaveVersion(kOld, 8);
  ASSERT_TRUE(newer.ok()) << newer.status().ToString();
  EXPECT_TRUE(LoadsExactly(store_.get(), "ns", "a", kOld));
}

TEST_F(SaveVersionTest, SameVersionOnlyForTheSameContent) {
  ASSERT_TRUE(SaveVersion(kNew, 3).ok());
  const auto files = mem_.AllFiles();
  auto other = SaveVersion(kOld, 3);
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("stale save: version 3 is on disk with other content"), std::string::npos)
      << other.status().ToString();
  EXPECT_EQ(mem_.AllFiles(), files);
  AgentRecord text_differs = MakeRecord("a", kNew);
  text_differs.version = 3;
  text_differs.text += "!";
  EXPECT_EQ(store_->SaveAgent("ns", text_differs, ProviderFor(kNew)).status().code(),
            StatusCode::kFailedPrecondition);
  auto retry = SaveVersion(kNew, 3);  // a retry of the same save is harmless
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_EQ(retry->record.version, 3u);
  EXPECT_TRUE(LoadsExactly(store_.get(), "ns", "a", kNew));
}

// A manifest written before versions existed has no "version": it reads as
// version 0, and any versioned save may follow it.
TEST_F(SaveVersionTest, ManifestWithoutVersionReadsAsZero) {
  ASSERT_TRUE(SaveVersion(kOld, 4).ok());
  const std::string path = "/cache/" + std::string(kFp) + "/" + NameHash("ns") + "/agents/" + NameHash("a") + ".json";
  auto doc = nlohmann::json::parse(*mem_.ReadFile(path));
  ASSERT_EQ(doc["record"]["version"], 4);
  doc["record"].erase("version");
  doc["checksum"] = Hex64(Xxh3_64(doc["record"].dump()));
  ASSERT_TRUE(mem_.CorruptFile(path, doc.dump()).ok());
  auto rec = DecodeManifest(doc.dump());
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->version, 0u);
  Open();
  EXPECT_EQ(store_->GetSummary("ns", "a")->version, 0u);
  EXPECT_TRUE(LoadsExactly(store_.get(), "ns", "a", kOld));
  ASSERT_TRUE(SaveVersion(kNew, 1).ok());
  EXPECT_TRUE(LoadsExactly(store_.get(), "ns", "a", kNew));

  doc["record"]["version"] = -1;  // present but not a version
  doc["checksum"] = Hex64(Xxh3_64(doc["record"].dump()));
  EXPECT_EQ(DecodeManifest(doc.dump()).status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace agentkv
