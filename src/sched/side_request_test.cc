// The side-request decision (ClassifyRequest), side agent ids and slot
// victims, as pure functions; HeadBytes on the bundled model's template.
#include "sched/side_request.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/test_support.h"
#include "util/names.h"

namespace agentkv::sched {
namespace {

const std::string kHead = "<s>system\nYou are a coding agent. " + std::string(2000, 'x') + "\n";
const std::string kConversation = kHead + "user\nFix the bug.\nassistant\nDone.\n";

bool ValidId(const std::string& id) { return ValidateName("agent id", id).ok(); }

SideDecision Classify(std::string_view prompt, size_t prompt_head, int64_t max_tokens = 256,
                      size_t cached_head = 0, std::string_view cached = kConversation) {
  return ClassifyRequest({cached, prompt, prompt_head, cached_head, max_tokens});
}

TEST(SideRequestTest, ContinuingTheConversationIsMain) {
  EXPECT_EQ(Classify(kConversation + "user\nNext.\nassistant\n", kHead.size()).kind, SideKind::kMain);
  EXPECT_EQ(Classify(kConversation, kHead.size(), /*max_tokens=*/1).kind, SideKind::kMain);  // exact, even a probe
}

TEST(SideRequestTest, AnotherSystemTextIsASideRequest) {
  const std::string title = "<s>system\nWrite a 5-word title.\nuser\nFix the bug.\nassistant\n";
  const SideDecision d = Classify(title, title.find("user\n"));
  EXPECT_EQ(d.kind, SideKind::kOtherHead);
  EXPECT_EQ(d.shared_bytes, std::string("<s>system\n").size());
  EXPECT_FALSE(d.fork_from_main);  // too little shared to restore
}

TEST(SideRequestTest, APromptWithoutSystemTextDivergesInsideTheCachedHead) {
  // Templates that put the system text inside the first user turn: the
  // probe's own head is short, the cached conversation's is not.
  const std::string cached = "<s>[INST] You are a coding agent. " + std::string(2000, 'x') + "\n\nFix it [/INST]";
  const std::string no_system = "<s>[INST] Summarize this. [/INST]";
  const size_t own_head = std::string("<s>[INST] ").size();
  EXPECT_EQ(Classify(no_system, own_head, 256, /*cached_head=*/0, cached).kind, SideKind::kMain);  // unknown head
  EXPECT_EQ(Classify(no_system, own_head, 256, /*cached_head=*/cached.find("Fix"), cached).kind,
            SideKind::kOtherHead);
}

TEST(SideRequestTest, ALongerHeadTakesTheMainRoleFromAShorterConversation) {
  // OpenCode: its title request (a system text of its own) comes first and
  // takes the empty agent; the real first turn's head alone is longer than
  // that whole conversation, so it becomes the main one and replaces it.
  const std::string title_head = "<s>system\nYou are a title generator.\n";
  const std::string title = title_head + "user\nFix the bug.\nassistant\nBug fix\n";
  const std::string turn1 = kHead + "user\nFix the bug.\nassistant\n";
  ASSERT_GT(kHead.size(), title.size());
  const SideDecision d = Classify(turn1, kHead.size(), 256, title_head.size(), title);
  EXPECT_EQ(d.kind, SideKind::kMain);
  EXPECT_TRUE(d.takes_over);
  EXPECT_FALSE(Classify(kConversation + "user\nNext.\nassistant\n", kHead.size()).takes_over);  // it extends
  // Not a probe, whatever its head.
  EXPECT_NE(Classify(turn1, kHead.size(), /*max_tokens=*/1, title_head.size(), title).kind, SideKind::kMain);
  // The other way round (the real conversation first, then its title
  // request) the conversation keeps the main role.
  EXPECT_EQ(Classify(title, title_head.size(), 256, kHead.size(), kConversation).kind, SideKind::kOtherHead);
  // A head no longer than the cached conversation does not take it over.
  const std::string other_head = "<s>system\nAnother agent. " + std::string(title.size() - 30, 'y') + "\n";
  ASSERT_LE(other_head.size(), title.size());
  EXPECT_EQ(Classify(other_head + "user\nHi.\n", other_head.size(), 256, title_head.size(), title).kind,
            SideKind::kOtherHead);
}

TEST(SideRequestTest, AProbeWhollyInsideTheConversationForksFromItHoweverShort) {
  // Re-asking an earlier prompt of the conversation with max_tokens 1: a
  // probe (the main keeps its reply), read from the main agent's cache.
  const std::string cached = "<s>system\nBe brief.\nuser\nHi.\nassistant\nHello.\n";
  const std::string earlier = cached.substr(0, cached.find("Hello"));
  const size_t head = cached.find("user\n");
  ASSERT_LT(earlier.size(), kMinForkBytes);
  const SideDecision d = Classify(earlier, head, /*max_tokens=*/1, head, cached);
  EXPECT_EQ(d.kind, SideKind::kProbe);
  EXPECT_TRUE(d.fork_from_main);
}

TEST(SideRequestTest, CompactionKeepsTheHeadAndReplacesTheConversation) {
  const std::string compacted = kHead + "user\nSummary of the conversation so far: a bug was fixed.\nassistant\n";
  const SideDecision d = Classify(compacted, kHead.size(), 256, kHead.size());
  EXPECT_EQ(d.kind, SideKind::kMain);
}

TEST(SideRequestTest, AOneTokenRequestThatDivergesIsAProbe) {
  const std::string probe = kHead + "user\nquota\nassistant\n";
  const SideDecision d = Classify(probe, kHead.size(), /*max_tokens=*/1, kHead.size());
  EXPECT_EQ(d.kind, SideKind::kProbe);
  EXPECT_TRUE(d.fork_from_main);  // it shares the whole head: restored from the main agent's cache
  EXPECT_EQ(Classify(probe, kHead.size(), /*max_tokens=*/0, kHead.size()).kind, SideKind::kProbe);
  EXPECT_EQ(Classify(probe, kHead.size(), /*max_tokens=*/2, kHead.size()).kind, SideKind::kMain);
}

TEST(SideRequestTest, AnAgentWithoutConversationTakesAnythingButAProbe) {
  EXPECT_EQ(Classify("<s>user\nhi\n", 0, 256, 0, "").kind, SideKind::kMain);
  EXPECT_EQ(Classify("<s>user\nquota\n", 0, 1, 0, "").kind, SideKind::kProbe);
}

TEST(SideRequestTest, SideAgentIdsAreValidAndStablePerHead) {
  const std::string a = SideAgentId("sess-1", "head one");
  EXPECT_EQ(a, SideAgentId("sess-1", "head one"));
  EXPECT_NE(a, SideAgentId("sess-1", "head two"));
  EXPECT_NE(a, SideAgentId("sess-2", "head one"));
  EXPECT_TRUE(a.starts_with("sess-1-side-"));
  EXPECT_TRUE(ValidId(a)) << a;
  const std::string long_id(128, 'a');
  const std::string b = SideAgentId(long_id, "head one");
  EXPECT_TRUE(ValidId(b)) << b;
  EXPECT_NE(b, SideAgentId(std::string(127, 'a'), "head one"));
}

TEST(SideRequestTest, SlotVictimsAreSideAgentsFirstAndTheProtectedMainLast) {
  // idle main (old), idle side (newer), protected main (oldest), busy side (oldest)
  std::vector<VictimCandidate> c = {{false, false, false, 10}, {false, true, false, 50},
                                    {false, false, true, 1}, {true, true, false, 0}};
  EXPECT_EQ(PickSlotVictim(c), 1u);
  c[1].busy = true;
  EXPECT_EQ(PickSlotVictim(c), 0u);
  c[0].busy = true;
  EXPECT_EQ(PickSlotVictim(c), 2u);  // the last resort
  c[2].busy = true;
  EXPECT_EQ(PickSlotVictim(c), std::string::npos);
}

TEST(SideRequestTest, HeadBytesEndWhereTheFirstUserMessageBegins) {
  auto model = std::move(engine::Model::Load(engine::testing::BundledModelPath())).value();
  engine::Tokenizer tokenizer(*model);
  auto format = engine::ChatFormat::Create(*model, tokenizer);
  engine::ChatRequest r;
  r.messages = {{"system", "You are a careful agent."}, {"user", "Always fix the bug."}};
  r.tools = {{"read_file", "Reads a file", R"({"type":"object","properties":{"path":{"type":"string"}}})"}};
  auto rendered = format->Render(r);
  ASSERT_TRUE(rendered.ok());
  const std::string& text = rendered->rendered.text;
  const size_t head = HeadBytes(*format, r, text);
  ASSERT_GT(head, 0u);
  EXPECT_EQ(text.substr(head, 6), "Always") << text;  // 'A': the sentinel became "B"
  EXPECT_NE(text.substr(0, head).find("You are a careful agent."), std::string::npos);
  EXPECT_NE(text.substr(0, head).find("read_file"), std::string::npos);
  r.messages = {{"system", "Only a system message."}};
  EXPECT_EQ(HeadBytes(*format, r, text), 0u);
}

}  // namespace
}  // namespace agentkv::sched
