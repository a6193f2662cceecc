#include "api/agent_identity.h"

#include <vector>

#include "util/names.h"
#include "util/hash.h"

namespace agentkv::api {
namespace {

// A tool's value as an agent id: verbatim when valid, else a stable hash
// (the tool decides the bytes; refusing them would make the tool unusable).
std::string ToolId(const std::string& value) {
  if (ValidateName("id", value).ok()) return value;
  return "h-" + Hex64(Xxh3_64(value));
}

// Empty headers count as absent (a tool sending "" has no session).
std::optional<std::string> NonEmpty(std::optional<std::string> v) {
  if (v && v->empty()) return std::nullopt;
  return v;
}

}  // namespace

AgentToolHeaders ReadAgentToolHeaders(
    const std::function<std::optional<std::string>(std::string_view)>& header) {
  AgentToolHeaders h;
  h.claude_session = NonEmpty(header("X-Claude-Code-Session-Id"));
  h.claude_agent = NonEmpty(header("X-Claude-Code-Agent-Id"));
  h.claude_parent_agent = NonEmpty(header("X-Claude-Code-Parent-Agent-Id"));
  h.codex_thread = NonEmpty(header("thread-id"));
  h.codex_session = NonEmpty(header("session-id"));
  if (!h.codex_session) h.codex_session = NonEmpty(header("session_id"));
  h.codex_parent_thread = NonEmpty(header("x-codex-parent-thread-id"));
  h.opencode_session = NonEmpty(header("x-opencode-session"));
  h.parent_session = NonEmpty(header("x-parent-session-id"));
  return h;
}

std::optional<ApiError> ResolveAgentIdentity(const ExplicitAgentIds& ids, const AgentToolHeaders& tools,
                                             AgentIdentity* out) {
  *out = AgentIdentity{};
  struct Source {
    const char* param;
    const std::optional<std::string>* value;
  };
  const Source sources[] = {{"X-Agent-Id", &ids.header_agent_id},
                            {"X-Session-ID", &ids.header_session_id},
                            {"agent_id", &ids.body_agent_id},
                            {"session_id", &ids.body_session_id}};
  for (const Source& s : sources) {
    if (!*s.value) continue;
    Status st = ValidateName(s.param, **s.value);
    if (!st.ok()) return InvalidRequest(st.message(), s.param, "invalid_agent_id");
    if (out->source.empty()) {
      out->source = s.param;
      out->agent_id = **s.value;
    } else if (out->agent_id != **s.value) {
      return InvalidRequest("Conflicting agent ids in '" + out->source + "' and '" + s.param + "'.", s.param,
                            "invalid_agent_id");
    }
  }
  if (!out->source.empty()) {
    if (out->source == "X-Session-ID" && tools.parent_session) out->parent_agent_id = ToolId(*tools.parent_session);
    return std::nullopt;
  }

  if (tools.claude_session) {
    const std::string& s = *tools.claude_session;
    out->source = "X-Claude-Code-Session-Id";
    if (tools.claude_agent) {
      out->agent_id = ToolId(s + "." + *tools.claude_agent);
      out->parent_agent_id = tools.claude_parent_agent ? ToolId(s + "." + *tools.claude_parent_agent) : ToolId(s);
    } else {
      out->agent_id = ToolId(s);
    }
  } else if (tools.codex_thread || tools.codex_session) {
    out->source = tools.codex_thread ? "thread-id" : "session-id";
    out->agent_id = ToolId(tools.codex_thread ? *tools.codex_thread : *tools.codex_session);
    if (tools.codex_parent_thread) out->parent_agent_id = ToolId(*tools.codex_parent_thread);
  } else if (tools.opencode_session) {
    out->source = "x-opencode-session";
    out->agent_id = ToolId(*tools.opencode_session);
    if (tools.parent_session) out->parent_agent_id = ToolId(*tools.parent_session);
  }
  // A parent equal to the child (a tool echoing its own id) is no relation.
  if (out->parent_agent_id == out->agent_id) out->parent_agent_id.clear();
  return std::nullopt;
}

}  // namespace agentkv::api
