#pragma once
// Side requests: what a coding agent sends on the same session id as its
// main conversation without continuing it (Claude Code's `max_tokens: 1`
// quota probe, title / topic generation with a system text of its own).
// Run as the main conversation they would truncate or overwrite its cache,
// and the next real turn would prefill 10-30K tokens again; so they run as a
// derived side agent instead, and the main agent's cache, slot and version
// stay as they were. docs/api.md, "Side requests".
//
// The decision is a pure function of the texts (ClassifyRequest); the
// scheduler applies it once per chat request with an explicit agent id (raw
// completions are never side requests), at admission (scheduler_turn.cc
// TryAdmit), and prefers side agents as slot victims (PickSlotVictim).
// Thread-compatible: everything here is pure.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat_format.h"

namespace agentkv::sched {

enum class SideKind {
  kMain,       // continues or replaces the agent's conversation (as before)
  kOtherHead,  // its system text or tools differ from the conversation's
  kProbe,      // max_tokens <= 1 and it does not continue the conversation
};

const char* SideKindName(SideKind kind);

struct SideInputs {
  std::string_view cached_text;  // the agent's cached text; empty: it holds no conversation
  std::string_view prompt;       // the request's rendered prompt
  // Bytes of `prompt` (resp. the cached conversation's prompt) that are the
  // system text and tools as rendered (HeadBytes); 0: unknown.
  size_t prompt_head_bytes = 0;
  size_t cached_head_bytes = 0;
  int64_t max_tokens = 0;  // the reply's limit as the turn will apply it
};

struct SideDecision {
  SideKind kind = SideKind::kMain;
  size_t shared_bytes = 0;  // length of the common prefix of cached_text and prompt
  // A side request sharing kMinForkBytes with the conversation, or whose
  // whole prompt lies inside it, starts from the main agent's cache
  // (read-only, as a subagent forks from its parent).
  bool fork_from_main = false;
  // kMain by the larger-head rule below: it replaces a conversation of
  // another head, whose cache is worth nothing to it, so the agent drops
  // that cache and the turn starts as a new agent's would (from a prefix
  // donor, e.g. an earlier session's same system text and tools, else cold).
  bool takes_over = false;
};

// Below this many shared bytes a side agent starts cold: restoring a few
// hundred tokens from the main agent's blocks costs about what prefilling
// them does.
inline constexpr size_t kMinForkBytes = 1024;

// A request for an agent that holds a conversation is a side request when
// it does not continue that conversation (the prompt does not start with the
// cached text) and either
//   - the two differ inside the system text and tools of either (the
//     prompt's head or the cached conversation's): a different system text
//     or tool set is a different conversation, or
//   - max_tokens <= 1: a probe, whose one-token reply is no turn.
// A probe to an agent that holds no conversation yet is a side request too
// (else the real first turn would be one). Everything else is the main
// conversation, as before: a prompt that keeps
// the system text and tools and replaces the messages (Claude Code's
// compaction) still replaces it, and its next turns extend the compacted one.
//
// The main role goes to the larger head: a request with another head whose
// own head (prompt_head_bytes) is longer than the agent's whole cached text
// is the main conversation, and replaces the cached one (unless it is a
// probe). OpenCode sends its title request (a 2 KB system text of its own)
// before the real first turn (a 10-30 KB system text and tools): the title
// takes the empty agent, and the real turn then takes the main role from it
// instead of running as a side agent. The conversation it replaces costs
// less to prefill again than the new head would (it is shorter), and a
// conversation longer than the new head (Claude Code's first turn before
// its title request) keeps the main role.
SideDecision ClassifyRequest(const SideInputs& in);

// The side agent's id: `main_id` + "-side-" + 16 hex digits of the hash of
// `head` (the request's rendered system text and tools), so one head is one
// side agent of that conversation; when that is longer than an agent id may
// be, "side-" + the hash of main_id + "-" + the head's hash. A valid agent id
// (util/names.h) for a valid main_id.
std::string SideAgentId(std::string_view main_id, std::string_view head);

// The bytes of `rendered` (the rendering of `request` by `format`) that come
// before the content of its first non-system message: the system text and
// tools wherever the template puts them before the conversation. Found as
// the common prefix of `rendered` and a rendering of the same system
// messages and tools with one user message whose content differs from the
// real one at its first character. 0 when there is no such message or that
// rendering fails. Costs one extra Render (any thread).
size_t HeadBytes(const engine::ChatFormat& format, const engine::ChatRequest& request, std::string_view rendered);

// A resident agent that could give up its slot.
struct VictimCandidate {
  bool busy = false;      // never a victim
  bool side = false;      // a side agent: evicted before any main agent
  bool protect = false;   // the main agent of the side agent that asks: only as the last resort
  int64_t last_use_ms = 0;
};

// Which candidate gives up its slot: an idle side agent before an idle main
// agent, least recently used first; a protected one only when no other is
// idle (else a side request would wait for a slot that never frees; the
// protected agent's cache is in the pool or on disk, so its next turn
// restores it, it does not prefill it). npos: all busy.
size_t PickSlotVictim(const std::vector<VictimCandidate>& candidates);

}  // namespace agentkv::sched
