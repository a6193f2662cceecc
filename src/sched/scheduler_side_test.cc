// Side requests through the scheduler (sched/side_request.h): a quota probe
// and a title request on the main conversation's agent id leave its cache,
// its slot, its version and its prompt's tokenization alone; a compaction
// (same system text and tools, messages replaced) still replaces the
// conversation; a title request sent first gives up the main role to the
// real conversation; after a restart the manifest's head length still
// tells a side request.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/test_support.h"
#include "sched/scheduler_fixture.h"

namespace agentkv::sched {
namespace {

class SchedulerSideTest : public SchedulerTest {
 protected:
  // A chat request shaped like a coding agent's main turn: a long system
  // text and a tool.
  static api::GenerationRequest Main(const std::string& agent, std::vector<api::ChatMessage> messages,
                                     int max_tokens = 12) {
    api::GenerationRequest r;
    r.namespace_id = "default";
    r.agent_id = agent;
    r.kind = api::RequestKind::kChat;
    r.messages = {{api::Role::kSystem, System()}};
    for (auto& m : messages) r.messages.push_back(std::move(m));
    r.tools = {{"read_file", "Reads a file of the project",
                R"({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]})"}};
    r.sampling.temperature = 0;
    r.sampling.max_tokens = max_tokens;
    return r;
  }
  static std::string System() { return "You are a coding agent. " + engine::testing::SampleText(16000); }
  // A conversation of two user turns, as the client sends it back.
  static std::vector<api::ChatMessage> Turn2(const std::string& reply1) {
    return {{api::Role::kUser, "Look at the parser."}, {api::Role::kAssistant, reply1},
            {api::Role::kUser, "Now fix it."}};
  }
  // Claude Code's quota probe: no system text, one word, max_tokens 1.
  static api::GenerationRequest Probe(const std::string& agent) {
    api::GenerationRequest r;
    r.namespace_id = "default";
    r.agent_id = agent;
    r.kind = api::RequestKind::kChat;
    r.messages = {{api::Role::kUser, "quota"}};
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 1;
    return r;
  }
  // Title generation: a short system text of its own and a summary.
  static api::GenerationRequest Title(const std::string& agent) {
    api::GenerationRequest r;
    r.namespace_id = "default";
    r.agent_id = agent;
    r.kind = api::RequestKind::kChat;
    r.messages = {{api::Role::kSystem, "Write a title of at most 5 words for this conversation."},
                  {api::Role::kUser, "The user asked to look at the parser."}};
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 8;
    return r;
  }
  int64_t Version(const std::string& agent) {
    auto info = sched_->GetAgent("default", agent);
    EXPECT_TRUE(info.ok());
    return info.ok() ? info->last_used_unix_ms : -1;
  }
};

TEST_F(SchedulerSideTest, ProbeAndTitleLeaveTheMainConversationAlone) {
  Boot(/*slots=*/2, 64u << 20, {}, /*slot_ctx=*/8192);
  // Control: the same two turns with nothing in between.
  auto c1 = Run(Main("control", {{api::Role::kUser, "Look at the parser."}}));
  auto c2 = Run(Main("control", Turn2(c1->text())));

  auto t1 = Run(Main("main", {{api::Role::kUser, "Look at the parser."}}));
  EXPECT_EQ(t1->text(), c1->text());
  const int64_t used = Version("main");

  auto probe = Run(Probe("main"));
  EXPECT_EQ(probe->usage().side_of, "main");
  EXPECT_TRUE(probe->usage().agent_id.starts_with("main-side-")) << probe->usage().agent_id;
  EXPECT_EQ(probe->usage().completion_tokens, 1);
  auto title = Run(Title("main"));
  EXPECT_EQ(title->usage().side_of, "main");
  EXPECT_TRUE(title->usage().agent_id.starts_with("main-side-"));
  EXPECT_NE(title->usage().agent_id, probe->usage().agent_id);  // another head, another side agent
  EXPECT_EQ(Version("main"), used);  // not counted as its turn
  // The title's side agent took the probe's slot (a side agent), not the
  // main agent's: the main agent is still resident.
  auto main_info = sched_->GetAgent("default", "main");
  ASSERT_TRUE(main_info.ok());
  EXPECT_EQ(main_info->tier, api::CacheState::kResident);

  const double reused_before = Metric("agentkv_prompt_tokens_tokenization_reused_total");
  auto t2 = Run(Main("main", Turn2(t1->text())));
  const api::Usage u = t2->usage();
  // Tokenized from turn 1's prompt, not from the side requests' (they are
  // remembered under their side agents).
  EXPECT_GE(Metric("agentkv_prompt_tokens_tokenization_reused_total") - reused_before,
            0.95 * static_cast<double>(t1->usage().prompt_tokens));
  EXPECT_EQ(u.agent_id, "main");
  EXPECT_EQ(u.side_of, "");
  EXPECT_EQ(u.cache_state, api::CacheState::kResident);
  EXPECT_EQ(u.cached_tokens, c2->usage().cached_tokens);  // as if the side requests had not happened
  EXPECT_GE(u.cached_tokens * 100, u.prompt_tokens * 99) << u.cached_tokens << " of " << u.prompt_tokens;
  EXPECT_EQ(t2->text(), c2->text());

  // A second title request continues its own side agent.
  auto title2 = Run(Title("main"));
  EXPECT_EQ(title2->usage().agent_id, title->usage().agent_id);
  EXPECT_GT(title2->usage().cached_tokens, 0);
}

TEST_F(SchedulerSideTest, AProbeThatSharesTheSystemTextReusesItReadOnly) {
  Boot(2, 64u << 20, {}, 8192);
  auto t1 = Run(Main("main", {{api::Role::kUser, "Look at the parser."}}));
  // The same system text and tools, other messages, max_tokens 1.
  auto probe = Run(Main("main", {{api::Role::kUser, "quota"}}, /*max_tokens=*/1));
  EXPECT_EQ(probe->usage().side_of, "main");
  EXPECT_GT(probe->usage().cached_tokens, probe->usage().prompt_tokens / 2);  // forked from the main agent
  auto t2 = Run(Main("main", Turn2(t1->text())));
  EXPECT_EQ(t2->usage().cache_state, api::CacheState::kResident);
  EXPECT_GE(t2->usage().cached_tokens * 100, t2->usage().prompt_tokens * 99);
}

TEST_F(SchedulerSideTest, AProbeBeforeTheFirstTurnDoesNotBecomeTheConversation) {
  Boot(2, 64u << 20, {}, 8192);
  auto probe = Run(Probe("main"));
  EXPECT_EQ(probe->usage().side_of, "main");
  auto t1 = Run(Main("main", {{api::Role::kUser, "Look at the parser."}}));
  EXPECT_EQ(t1->usage().agent_id, "main");
  auto t2 = Run(Main("main", Turn2(t1->text())));
  EXPECT_EQ(t2->usage().agent_id, "main");
  EXPECT_GE(t2->usage().cached_tokens * 100, t2->usage().prompt_tokens * 99);
}

TEST_F(SchedulerSideTest, ATitleRequestBeforeTheFirstTurnGivesUpTheMainRole) {
  // OpenCode's order: the title request (a short system text of its own)
  // first, then the real conversation's first turn.
  Boot(2, 64u << 20, {}, 8192);
  auto title = Run(Title("main"));
  EXPECT_EQ(title->usage().agent_id, "main");  // the empty agent takes it
  auto t1 = Run(Main("main", {{api::Role::kUser, "Look at the parser."}}));
  EXPECT_EQ(t1->usage().agent_id, "main");
  EXPECT_EQ(t1->usage().side_of, "");
  auto t2 = Run(Main("main", Turn2(t1->text())));
  EXPECT_EQ(t2->usage().agent_id, "main");
  EXPECT_EQ(t2->usage().cache_state, api::CacheState::kResident);
  EXPECT_GE(t2->usage().cached_tokens * 100, t2->usage().prompt_tokens * 99);
  // A later title request is a side request of the real conversation.
  auto title2 = Run(Title("main"));
  EXPECT_EQ(title2->usage().side_of, "main");
  // A second session in the same order: its first turn drops its title
  // conversation and starts from the first session's system text and tools
  // (a prefix donor), as a new agent's would.
  Run(Title("second"));
  auto s1 = Run(Main("second", {{api::Role::kUser, "Look at the lexer."}}));
  EXPECT_EQ(s1->usage().agent_id, "second");
  EXPECT_GE(s1->usage().shared_tokens * 100, s1->usage().prompt_tokens * 90)
      << s1->usage().shared_tokens << " of " << s1->usage().prompt_tokens;
}

// A template that puts the system text inside the first user turn (as
// Llama 2's and Mistral's do): a request without system text then shares the
// cached conversation's whole own head ("[INST] "), and only the cached
// conversation's head tells that it diverges inside it.
constexpr char kSystemInUserTemplate[] =
    "{% set ns = namespace(sys='') %}{% for m in messages %}"
    "{% if m.role == 'system' %}{% set ns.sys = ns.sys + m.content + '\n\n' %}"
    "{% elif m.role == 'user' %}[INST] {{ ns.sys }}{{ m.content }} [/INST]{% set ns.sys = '' %}"
    "{% else %}{{ m.content }}\n{% endif %}{% endfor %}";

TEST_F(SchedulerSideTest, AfterARestartTheCachedHeadStillTellsASideRequest) {
  SchedulerOptions opt;
  opt.chat_template = kSystemInUserTemplate;
  Boot(2, 64u << 20, opt, 8192);
  api::GenerationRequest first = Main("main", {{api::Role::kUser, "Look at the parser."}});
  first.tools.clear();
  auto t1 = Run(first);
  Boot(2, 64u << 20, opt, 8192);  // a restart: the agent is known from its manifest only
  api::GenerationRequest summary = Title("main");
  summary.messages = {{api::Role::kUser, "Summarize the conversation in five words."}};  // no system text
  auto side = Run(summary);
  EXPECT_EQ(side->usage().side_of, "main");
  EXPECT_TRUE(side->usage().agent_id.starts_with("main-side-")) << side->usage().agent_id;
  api::GenerationRequest second = Main("main", Turn2(t1->text()));
  second.tools.clear();
  auto t2 = Run(second);
  EXPECT_EQ(t2->usage().agent_id, "main");
  EXPECT_GE(t2->usage().cached_tokens * 100, t2->usage().prompt_tokens * 99)
      << t2->usage().cached_tokens << " of " << t2->usage().prompt_tokens;
}

TEST_F(SchedulerSideTest, CompactionStillReplacesTheConversation) {
  Boot(2, 64u << 20, {}, 8192);
  auto t1 = Run(Main("main", {{api::Role::kUser, "Look at the parser."}}));
  auto t2 = Run(Main("main", Turn2(t1->text())));
  // Claude Code's compaction: the same system text and tools, the messages
  // replaced by a summary.
  std::vector<api::ChatMessage> compacted = {{api::Role::kUser, "Summary: we looked at the parser and fixed it."}};
  auto c1 = Run(Main("main", compacted));
  EXPECT_EQ(c1->usage().agent_id, "main");
  EXPECT_EQ(c1->usage().side_of, "");
  EXPECT_EQ(c1->usage().match, api::MatchType::kDiverge);
  compacted.push_back({api::Role::kAssistant, c1->text()});
  compacted.push_back({api::Role::kUser, "Go on."});
  auto c2 = Run(Main("main", compacted));
  EXPECT_EQ(c2->usage().agent_id, "main");
  EXPECT_GE(c2->usage().cached_tokens * 100, c2->usage().prompt_tokens * 99);  // extends the compacted one
}

}  // namespace
}  // namespace agentkv::sched
