// AgentTable without a model: the implicit index follows Reindex, the
// implicit lookup continues, forks or mints, and Trim drops the least
// recently used agents it may.
#include "sched/agent_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace agentkv::sched {
namespace {

// A sequence of one token per byte of `text`.
CachedSequence SequenceOfText(const std::string& text) {
  CachedSequence seq;
  seq.text = text;
  for (uint32_t i = 0; i < text.size(); ++i) {
    seq.tokens.push_back(static_cast<int32_t>(text[i]));
    seq.spans.push_back({i, i + 1});
  }
  return seq;
}

Agent& AddIdle(AgentTable& table, const AgentKey& key, const std::string& text, int64_t last_use_ms = 0) {
  Agent& a = table.GetOrAdd(key);
  a.seq = SequenceOfText(text);
  a.last_use_ms = last_use_ms;
  table.Reindex(a);
  return a;
}

TEST(AgentTableTest, TheIndexHoldsOnlyIdleAgentsWithAText) {
  AgentTable table(1 << 20);
  Agent& a = AddIdle(table, {"ns", "a"}, "the shared system text");
  ASSERT_TRUE(table.LongestPrefix("ns", "the shared system text, and more"));
  EXPECT_FALSE(table.LongestPrefix("other", "the shared system text"));
  a.busy = true;
  table.Reindex(a);
  EXPECT_FALSE(table.LongestPrefix("ns", "the shared system text"));
  a.busy = false;
  a.isolated = true;
  table.Reindex(a);
  EXPECT_FALSE(table.LongestPrefix("ns", "the shared system text"));
  EXPECT_GT(table.bytes(), 0u);
  table.Erase({"ns", "a"});
  EXPECT_EQ(table.Find({"ns", "a"}), nullptr);
  EXPECT_EQ(table.bytes(), 0u);
  EXPECT_EQ(table.agents_gauge(), 0u);
}

TEST(AgentTableTest, TheImplicitLookupContinuesForksOrMints) {
  AgentTable table(1 << 20);
  AddIdle(table, {"ns", "a"}, "You are helpful. Hello there");
  EXPECT_EQ(table.ResolveImplicit("ns", "You are helpful. Hello there", false, 0.5), "a");  // EXACT
  EXPECT_EQ(table.ResolveImplicit("ns", "You are helpful. Hello there, friend", false, 0.5), "a");  // EXTEND
  // DIVERGE: a new agent that starts from a's cache; a itself stays.
  const std::string fork = table.ResolveImplicit("ns", "You are helpful. Hello back", false, 0.5);
  ASSERT_NE(fork, "a");
  const Agent* f = table.Find({"ns", fork});
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->fork_source);
  EXPECT_EQ(f->fork_source->agent_id, "a");
  // MISS and isolated: a new id, no agent added.
  const std::string miss = table.ResolveImplicit("ns", "Something else entirely", false, 0.5);
  EXPECT_EQ(miss.rfind("auto-", 0), 0u);
  EXPECT_EQ(table.Find({"ns", miss}), nullptr);
  const std::string isolated = table.ResolveImplicit("ns", "You are helpful. Hello there", true, 0.5);
  EXPECT_NE(isolated, "a");
}

TEST(AgentTableTest, TrimDropsTheLeastRecentlyUsedDroppableAgents) {
  AgentTable table(4096);
  for (int i = 0; i < 40; ++i) {
    Agent& a = AddIdle(table, {"ns", "agent-" + std::to_string(i)}, std::string(64, 'a' + i % 26), 1000 + i);
    a.on_disk = true;
  }
  AddIdle(table, {"ns", "kept"}, std::string(64, 'z'), 0);  // oldest, but not droppable
  ASSERT_GT(table.bytes(), table.budget_bytes());
  const size_t dropped = table.Trim([](const Agent& a) { return a.key.agent_id != "kept"; });
  EXPECT_GT(dropped, 0u);
  EXPECT_LE(table.bytes(), table.budget_bytes());
  EXPECT_NE(table.Find({"ns", "kept"}), nullptr);
  EXPECT_EQ(table.Find({"ns", "agent-0"}), nullptr);   // the least recently used went first
  EXPECT_NE(table.Find({"ns", "agent-39"}), nullptr);  // the newest stayed
  EXPECT_TRUE(table.Trimmed("ns"));
  EXPECT_FALSE(table.Trimmed("other"));
  std::vector<std::string> listed;
  table.ForEachIn("ns", [&](const Agent& a) { listed.push_back(a.key.agent_id); });
  EXPECT_EQ(listed.size(), table.agents_gauge());
}

}  // namespace
}  // namespace agentkv::sched
