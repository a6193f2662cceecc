// StoreIndex: the in-memory picture's own questions (no files): reference
// counts, the least recently used agent and the totals the disk budget uses,
// summaries.
#include "store/store_index.h"

#include <gtest/gtest.h>

namespace agentkv {
namespace {

StoreIndex::Agent AgentNaming(std::vector<std::string> block_ids, int64_t last_used_ms, uint64_t manifest_bytes = 10) {
  StoreIndex::Agent a;
  for (const std::string& id : block_ids) {
    BlockRef b;
    b.id = id;
    b.file_bytes = 100;
    a.blocks.push_back(b);
  }
  a.last_used_ms = last_used_ms;
  a.manifest_bytes = manifest_bytes;
  return a;
}

TEST(StoreIndexTest, RefsCountTheAgentsNamingEachBlockOnDisk) {
  StoreIndex index;
  StoreIndex::Namespace& ns = index.FindOrAdd("t", "/c/t");
  ns.blocks["shared"].refs = 7;  // stale
  ns.blocks["own"];
  ns.blocks["orphan"];
  ns.agents["a"] = AgentNaming({"shared", "own"}, 1);
  ns.agents["b"] = AgentNaming({"shared", "gone"}, 2);  // "gone": named, not on disk
  StoreIndex::RecountRefs(&ns);
  EXPECT_EQ(ns.blocks["shared"].refs, 2u);
  EXPECT_EQ(ns.blocks["own"].refs, 1u);
  EXPECT_EQ(ns.blocks["orphan"].refs, 0u);
  EXPECT_EQ(ns.blocks.count("gone"), 0u);
  const AgentSummary s = StoreIndex::Summary(ns, "b", ns.agents["b"]);
  EXPECT_EQ(s.ns, "t");
  EXPECT_EQ(s.n_blocks, 2u);
  EXPECT_EQ(s.n_blocks_on_disk, 1u);
  EXPECT_EQ(s.block_bytes, 200u);
}

TEST(StoreIndexTest, TheLruVictimSkipsTheKeptAgentAndTotalsCoverWhatWasSearched) {
  StoreIndex index;
  StoreIndex::Namespace& t = index.FindOrAdd("t", "/c/t");
  StoreIndex::Namespace& u = index.FindOrAdd("u", "/c/u");
  EXPECT_EQ(&index.FindOrAdd("t", "/elsewhere"), &t);  // found, not re-made
  EXPECT_EQ(t.dir, "/c/t");
  t.blocks["x"].file_bytes = 1000;
  t.agents["old"] = AgentNaming({"x"}, 5);
  t.agents["new"] = AgentNaming({"x"}, 50);
  u.agents["older"] = AgentNaming({}, 1);
  StoreIndex::Namespace* victim_ns = nullptr;
  std::string victim;
  uint64_t total = 0;
  ASSERT_TRUE(index.PickLruVictim(nullptr, "", &victim_ns, &victim, &total));
  EXPECT_EQ(victim_ns, &u);
  EXPECT_EQ(victim, "older");
  EXPECT_EQ(total, 1000u + 3 * 10u);
  ASSERT_TRUE(index.PickLruVictim(&u, "older", &victim_ns, &victim, &total));
  EXPECT_EQ(victim, "old");
  ASSERT_TRUE(index.PickLruVictim(&t, "old", &victim_ns, &victim, &total, /*only_ns=*/&t));
  EXPECT_EQ(victim, "new");
  EXPECT_EQ(total, 1000u + 2 * 10u);
  EXPECT_FALSE(index.PickLruVictim(&u, "older", &victim_ns, &victim, nullptr, &u));
  const StoreIndex::Totals tot = index.totals();
  EXPECT_EQ(tot.agents, 3u);
  EXPECT_EQ(tot.block_files, 1u);
  EXPECT_EQ(tot.disk_bytes, 1030u);
}

TEST(StoreIndexTest, ResetReplacesThePictureAndListsOnlyNamespacesWithAgents) {
  StoreIndex index;
  index.FindOrAdd("stale", "/c/s").agents["a"];
  std::vector<StoreIndex::Namespace> scanned(2);
  scanned[0].name = "b";
  scanned[0].agents["x"];
  scanned[1].name = "a";  // no agents
  index.Reset(std::move(scanned));
  EXPECT_EQ(index.Find("stale"), nullptr);
  ASSERT_NE(index.Find("a"), nullptr);
  EXPECT_EQ(index.All().size(), 2u);
  EXPECT_EQ(index.NamesWithAgents(), std::vector<std::string>{"b"});
}

TEST(StoreIndexTest, AnAgentFromItsManifestIsLastUsedWhenItWasUpdated) {
  AgentRecord rec;
  rec.tokens = {1, 2, 3};
  rec.text = "abc";
  rec.updated_ms = 42;
  rec.version = 3;
  rec.blocks = {BlockRef{"k", 9}};
  const StoreIndex::Agent a = StoreIndex::AgentOfManifest(rec, 77, /*usable=*/false);
  EXPECT_EQ(a.n_tokens, 3u);
  EXPECT_EQ(a.text_bytes, 3u);
  EXPECT_EQ(a.manifest_bytes, 77u);
  EXPECT_EQ(a.last_used_ms, 42);
  EXPECT_EQ(a.version, 3u);
  EXPECT_FALSE(a.usable);
  EXPECT_EQ(a.blocks, rec.blocks);
}

}  // namespace
}  // namespace agentkv
