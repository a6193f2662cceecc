#pragma once
// Which agent a request belongs to: agentkv's own explicit ids, and the
// session headers coding agents already send on every request, so that
// Claude Code, Codex and OpenCode get one cache per conversation without any
// configuration. Precedence and the exact header names: docs/api.md,
// "Agent identity". Shared by the OpenAI and Anthropic request parsers.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "api/errors.h"

namespace agentkv::api {

// agentkv's explicit sources, in precedence order. All present ones must be
// equal (else 400); each must be a valid id (util/names.h; else 400).
struct ExplicitAgentIds {
  std::optional<std::string> header_agent_id;    // X-Agent-Id
  std::optional<std::string> header_session_id;  // X-Session-ID (also OpenCode's, see below)
  std::optional<std::string> body_agent_id;      // body "agent_id"
  std::optional<std::string> body_session_id;    // body "session_id"
};

// Session headers of coding agents, as sent (names from each tool's source;
// docs/api.md says which version was read). All optional.
struct AgentToolHeaders {
  // Claude Code: every request of a session carries the session id; a
  // subagent's requests also carry its own agent id and, when its parent is
  // itself a subagent, the parent's agent id.
  std::optional<std::string> claude_session;       // X-Claude-Code-Session-Id
  std::optional<std::string> claude_agent;         // X-Claude-Code-Agent-Id
  std::optional<std::string> claude_parent_agent;  // X-Claude-Code-Parent-Agent-Id
  // Codex: the thread (one conversation; a spawned subagent is its own
  // thread) and its session; older Codex sent only session_id.
  std::optional<std::string> codex_thread;         // thread-id
  std::optional<std::string> codex_session;        // session-id, else session_id
  std::optional<std::string> codex_parent_thread;  // x-codex-parent-thread-id
  // OpenCode: X-Session-Id (see ExplicitAgentIds) for most providers,
  // x-opencode-session for its own; a child session (subagent) also sends
  // its parent's session id.
  std::optional<std::string> opencode_session;         // x-opencode-session
  std::optional<std::string> parent_session;           // x-parent-session-id
};

// Reads every header above through `header` (a case-insensitive lookup).
AgentToolHeaders ReadAgentToolHeaders(const std::function<std::optional<std::string>(std::string_view)>& header);

struct AgentIdentity {
  std::string agent_id;         // empty: implicit (longest-prefix matching)
  std::string parent_agent_id;  // non-empty: a new agent forks from this one
  std::string source;           // the header or field the id came from (logs, tests)
};

// Resolution order:
//   1. the explicit ids (all present must agree);
//   2. Claude Code: session S, or "S.A" for subagent A; parent S (or "S.P"
//      when the parent is subagent P);
//   3. Codex: thread-id, else session-id / session_id; parent
//      x-codex-parent-thread-id;
//   4. OpenCode: x-opencode-session.
// x-parent-session-id is the parent when the id came from X-Session-ID or
// x-opencode-session. A tool's value that is not a valid agent id (util/names.h)
// is replaced by "h-" + 16 hex digits of its hash (same value, same id), since
// the user cannot change what the tool sends; an invalid EXPLICIT id is a 400.
// Returns the error to send, or nullopt with *out filled.
[[nodiscard]] std::optional<ApiError> ResolveAgentIdentity(const ExplicitAgentIds& explicit_ids,
                                                           const AgentToolHeaders& tools, AgentIdentity* out);

}  // namespace agentkv::api
