#include "api/agent_identity.h"

#include <map>

#include <gtest/gtest.h>

namespace agentkv::api {
namespace {

AgentIdentity Resolve(const ExplicitAgentIds& ids, const AgentToolHeaders& tools) {
  AgentIdentity out;
  auto e = ResolveAgentIdentity(ids, tools, &out);
  EXPECT_FALSE(e) << (e ? e->message : "");
  return out;
}

TEST(AgentIdentityTest, ReadsTheToolsHeadersCaseInsensitively) {
  std::map<std::string, std::string> sent = {{"x-claude-code-session-id", "s1"},
                                             {"x-claude-code-agent-id", "a1"},
                                             {"thread-id", "t1"},
                                             {"session_id", "old"},
                                             {"x-parent-session-id", "p"}};
  AgentToolHeaders h = ReadAgentToolHeaders([&](std::string_view name) -> std::optional<std::string> {
    std::string lower(name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto it = sent.find(lower);
    return it == sent.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
  EXPECT_EQ(h.claude_session, "s1");
  EXPECT_EQ(h.claude_agent, "a1");
  EXPECT_FALSE(h.claude_parent_agent);
  EXPECT_EQ(h.codex_thread, "t1");
  EXPECT_EQ(h.codex_session, "old");  // older Codex's session_id when session-id is absent
  EXPECT_EQ(h.parent_session, "p");
}

TEST(AgentIdentityTest, ExplicitIdsWinAndMustAgree) {
  AgentToolHeaders tools;
  tools.claude_session = "cc-session";
  EXPECT_EQ(Resolve({"a", std::nullopt, "a", std::nullopt}, tools).agent_id, "a");
  EXPECT_EQ(Resolve({std::nullopt, std::nullopt, std::nullopt, "b"}, tools).agent_id, "b");
  AgentIdentity out;
  auto e = ResolveAgentIdentity({"a", "b", std::nullopt, std::nullopt}, tools, &out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "X-Session-ID");
  e = ResolveAgentIdentity({"../x", std::nullopt, std::nullopt, std::nullopt}, tools, &out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "invalid_agent_id");
}

TEST(AgentIdentityTest, ClaudeCodeSessionAndSubagents) {
  AgentToolHeaders t;
  t.claude_session = "5f0c";
  AgentIdentity main = Resolve({}, t);
  EXPECT_EQ(main.agent_id, "5f0c");
  EXPECT_EQ(main.parent_agent_id, "");
  EXPECT_EQ(main.source, "X-Claude-Code-Session-Id");
  t.claude_agent = "sub1";  // a subagent of the main thread
  AgentIdentity sub = Resolve({}, t);
  EXPECT_EQ(sub.agent_id, "5f0c.sub1");
  EXPECT_EQ(sub.parent_agent_id, "5f0c");
  t.claude_agent = "sub2";  // a subagent of sub1
  t.claude_parent_agent = "sub1";
  AgentIdentity subsub = Resolve({}, t);
  EXPECT_EQ(subsub.agent_id, "5f0c.sub2");
  EXPECT_EQ(subsub.parent_agent_id, "5f0c.sub1");
}

TEST(AgentIdentityTest, CodexThreadsAndOpenCodeSessions) {
  AgentToolHeaders t;
  t.codex_session = "root";
  EXPECT_EQ(Resolve({}, t).agent_id, "root");
  t.codex_thread = "child";
  t.codex_parent_thread = "root";
  AgentIdentity codex = Resolve({}, t);
  EXPECT_EQ(codex.agent_id, "child");
  EXPECT_EQ(codex.parent_agent_id, "root");
  EXPECT_EQ(codex.source, "thread-id");

  AgentToolHeaders oc;
  oc.opencode_session = "ses_2";
  oc.parent_session = "ses_1";
  AgentIdentity opencode = Resolve({}, oc);
  EXPECT_EQ(opencode.agent_id, "ses_2");
  EXPECT_EQ(opencode.parent_agent_id, "ses_1");
  // OpenCode's default header is X-Session-Id (an explicit source); its
  // x-parent-session-id still names the parent.
  AgentIdentity via_x_session = Resolve({std::nullopt, "ses_3", std::nullopt, std::nullopt}, oc);
  EXPECT_EQ(via_x_session.agent_id, "ses_3");
  EXPECT_EQ(via_x_session.parent_agent_id, "ses_1");
  // Claude Code's headers come before Codex's and OpenCode's.
  t.claude_session = "cc";
  EXPECT_EQ(Resolve({}, t).agent_id, "cc");
  // Nothing at all: implicit.
  EXPECT_EQ(Resolve({}, {}).agent_id, "");
}

TEST(AgentIdentityTest, InvalidToolValuesAreHashedNotRefused) {
  AgentToolHeaders t;
  t.codex_thread = "thread with spaces/and/slashes";
  AgentIdentity a = Resolve({}, t);
  EXPECT_EQ(a.agent_id.rfind("h-", 0), 0u) << a.agent_id;
  EXPECT_EQ(a.agent_id.size(), 18u);
  EXPECT_EQ(Resolve({}, t).agent_id, a.agent_id);  // stable
  t.codex_thread = std::string(200, 'x');          // too long
  EXPECT_EQ(Resolve({}, t).agent_id.rfind("h-", 0), 0u);
  t.codex_thread = "same";
  t.codex_parent_thread = "same";  // a parent equal to the child is no relation
  EXPECT_EQ(Resolve({}, t).parent_agent_id, "");
}

}  // namespace
}  // namespace agentkv::api
