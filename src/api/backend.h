#pragma once
// The seam between the HTTP layer (api/) and whatever generates text (the
// scheduler in production, FakeBackend in tests).
//
// Everything here is native C++: JSON never crosses this boundary. The HTTP
// layer parses and validates a request into a GenerationRequest, calls
// Backend::Submit with a GenerationSink, and turns the sink's callbacks into
// a JSON response or an SSE stream. Header-only on purpose (CMake target
// agentkv_api_backend): an implementation depends on util/ and nothing else.
//
// Thread model: Backend methods are called from many HTTP threads at once and
// must be thread-safe. Sink callbacks come from the backend's own thread(s).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace agentkv::api {

// A flag shared between the HTTP thread (sets it when the client goes away)
// and the backend (polls it between steps). Copies share one flag.
class CancellationToken {
 public:
  CancellationToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
  void Cancel() const { flag_->store(true, std::memory_order_relaxed); }
  bool cancelled() const { return flag_->load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

enum class RequestKind { kChat, kCompletion };

// "developer" messages arrive as kSystem. kTool: the result of a tool call
// (OpenAI role "tool"; an Anthropic "tool_result" block becomes one).
enum class Role { kSystem, kUser, kAssistant, kTool };

// One function call made by the assistant: OpenAI's message.tool_calls[i]
// ({id, type:"function", function:{name, arguments}}), Anthropic's
// "tool_use" block ({id, name, input}). API-neutral on purpose: both routes
// build and read these.
struct ToolCall {
  // Client-visible id of the call ("call_..." from agentkv, or whatever the
  // client sent back); a kTool message answers it by tool_call_id. The
  // chat template may or may not render it (most do not).
  std::string id;
  std::string name;  // function name
  // The arguments as JSON text, normally an object ("{\"city\":\"Paris\"}").
  // Requests: OpenAI's string as sent (Anthropic's `input` serialized);
  // replies: what the model wrote, parsed and re-serialized by the model's
  // tool-call parser. api/ does not interpret it.
  std::string arguments;
};

// One message of a conversation, after api/ has normalized it.
//   kSystem / kUser: content.
//   kAssistant: content (may be empty) and/or tool_calls.
//   kTool: content = the tool's result text; tool_call_id = the call it
//          answers (required by both APIs); tool_name = the function's name
//          when known (OpenAI's optional `name`; empty otherwise).
struct ChatMessage {
  Role role = Role::kUser;
  std::string content;  // UTF-8 text; multi-part text content is joined
  std::vector<ToolCall> tool_calls;  // kAssistant only
  std::string tool_call_id;          // kTool only
  std::string tool_name;             // kTool only, optional
  // kAssistant only: the turn's thinking as the client sent it back (OpenAI
  // `reasoning_content`); empty when not sent. Templates that keep past
  // thinking render it; most drop it from earlier turns.
  std::string reasoning_content;
};

// How a reasoning model's thinking is returned (llama-server's
// --reasoning-format): kNone leaves it in the content as the model wrote it;
// kAuto and kDeepseek (the same) return it apart (OpenAI
// `reasoning_content`, Anthropic `thinking` blocks) through
// GenerationSink::OnReasoningDelta. Applies to templates that declare
// thinking (e.g. DeepSeek-R1, Qwen3); others' replies are plain content.
enum class ReasoningFormat { kNone, kAuto, kDeepseek };

// A function the model may call (OpenAI tools[i].function; Anthropic
// tools[i] with input_schema).
struct ToolDefinition {
  std::string name;         // [A-Za-z0-9_-], 1..64 chars (checked by api/)
  std::string description;  // may be empty
  // JSON Schema of the arguments, as JSON object text; empty = no arguments
  // ({"type":"object","properties":{}}). Checked by the backend: a schema
  // it cannot turn into a grammar is InvalidArgument (400).
  std::string parameters;
  bool strict = false;  // informational: calls are always grammar-constrained when forced
};

// OpenAI tool_choice / Anthropic tool_choice {auto, any, tool, none}.
enum class ToolChoiceMode {
  kAuto,      // the model decides (a lazy grammar applies once a call starts)
  kNone,      // tools are described to the model but it may not call them
  kRequired,  // at least one call, grammar-constrained (Anthropic "any")
  kFunction,  // a call of `function`, grammar-constrained (Anthropic "tool")
};
struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string function;  // kFunction: a name among the request's tools
};

// OpenAI response_format. Anthropic has no equivalent (kText).
enum class ResponseFormatType { kText, kJsonObject, kJsonSchema };
struct ResponseFormat {
  ResponseFormatType type = ResponseFormatType::kText;
  // kJsonSchema: the schema (json_schema.schema) as JSON text. Output is
  // constrained to it by a grammar whether or not `strict` is set; a schema
  // that cannot become a grammar is InvalidArgument (400) from Submit.
  std::string schema;
  std::string name;     // json_schema.name, informational
  bool strict = false;  // informational (always enforced)
};

struct SamplingParams {
  // Unset: until EOS or the context is full. A value beyond the remaining
  // context is not an error: the backend stops there with kLength.
  std::optional<int32_t> max_tokens;
  float temperature = 1.0f;           // [0, 2]; 0 = greedy
  float top_p = 1.0f;                 // (0, 1]
  int32_t top_k = 0;                  // >= 0; 0 = disabled
  std::optional<int64_t> seed;        // unset: backend's choice
  std::vector<std::string> stop;      // non-empty strings (OpenAI <= 4, Anthropic <= 16)
  // Log-probabilities of the sampled tokens (OpenAI `logprobs`): -1 off;
  // 0..kMaxTopLogprobs on, with that many most likely alternatives per token.
  int32_t top_logprobs = -1;
};
inline constexpr int32_t kMaxTopLogprobs = 20;

// One sampled token's log-probability under the model's distribution at
// temperature 1 (log-softmax of the raw logits, before temperature, top-k,
// top-p or a grammar: what the model believed, as OpenAI reports it), and the
// most likely tokens at that step, best first. GenerationSink::OnLogprob.
struct TokenLogprob {
  struct Alternative {
    std::string token;  // the token's bytes; may be part of a UTF-8 character
    float logprob = 0;
  };
  std::string token;
  float logprob = 0;
  std::vector<Alternative> top;  // SamplingParams::top_logprobs long (fewer only with a tiny vocabulary)
};

struct GenerationRequest {
  std::string request_id;    // "chatcmpl-..." / "cmpl-...", unique per server
  std::string namespace_id;  // tenant (from the API key); never empty
  // The API key is isolated (ApiKeys, "NAME:KEY:isolated"): without agent_id
  // the request never continues or forks another conversation of the
  // namespace (it starts a new agent), and an agent it creates is never
  // matched implicitly by other requests, so usage.cached_tokens only counts
  // reuse of the agent the request names. (Other keys never reach the key's
  // agents at all: namespace_id is then the key's own, IsolatedNamespace.)
  bool isolated = false;
  // Explicit agent id, validated by api/ (util/names.h). Empty = implicit:
  // the backend picks or creates the agent within namespace_id.
  std::string agent_id;
  // Explicit parent (a subagent's, from the coding agents' headers; see
  // api/agent_identity.h). When agent_id names an agent that does not exist
  // yet and this one exists and is idle, the new agent starts as a fork of
  // the parent's cache (its blocks are shared, the common prefix is not
  // prefilled again). Otherwise ignored. Empty: none.
  std::string parent_agent_id;
  // Where agent_id came from (AgentIdentity::source: a header or body field
  // name), for the request log; empty: implicit.
  std::string agent_source;
  RequestKind kind = RequestKind::kChat;
  std::vector<ChatMessage> messages;  // kChat: non-empty
  std::string prompt;                 // kCompletion: the raw prompt text
  // kChat only. With tools (and mode != kNone) the reply may contain tool
  // calls: the backend parses them out of the model's text with the model's
  // own tool-call format and reports them by GenerationSink::OnToolCallDelta.
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice;            // kFunction/kRequired need non-empty tools (api/ checks)
  bool parallel_tool_calls = true;   // false: at most one call per reply
  ResponseFormat response_format;    // kChat only; not together with forced tool calls
  // kChat only. Unset: the server's --reasoning-format.
  std::optional<ReasoningFormat> reasoning_format;
  // kChat only: the template's enable_thinking (OpenAI
  // chat_template_kwargs.enable_thinking; Anthropic `thinking`). Unset: true.
  std::optional<bool> enable_thinking;
  SamplingParams sampling;
  bool stream = false;         // informational: output arrives by deltas anyway
  // False (body "cache_prompt": false, as llama-server's): the prompt is
  // prefilled cold, reusing no cache (the agent's own, a donor's, a fork's;
  // without an agent id it starts a new agent). Its turn is still cached.
  bool reuse_cache = true;
  bool include_usage = false;  // informational
  CancellationToken cancel;    // set when the client disconnects
  // When the HTTP request arrived (before parsing and token counting): where
  // usage.ttft_ms starts. Default (epoch): the backend's own receipt time.
  std::chrono::steady_clock::time_point received{};
};

// Where the agent's cache was found when the request started.
enum class CacheState { kResident, kHot, kWarm, kRemote, kCold };
// How the new prompt related to the cached text (DESIGN §6).
enum class MatchType { kExact, kExtend, kDiverge, kMiss };

inline const char* CacheStateName(CacheState s) {
  switch (s) {
    case CacheState::kResident: return "resident";
    case CacheState::kHot: return "hot";
    case CacheState::kWarm: return "warm";
    case CacheState::kRemote: return "remote";
    case CacheState::kCold: return "cold";
  }
  return "cold";
}

inline const char* MatchTypeName(MatchType m) {
  switch (m) {
    case MatchType::kExact: return "exact";
    case MatchType::kExtend: return "extend";
    case MatchType::kDiverge: return "diverge";
    case MatchType::kMiss: return "miss";
  }
  return "miss";
}

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens reused from the cache
  // Of cached_tokens: those that came from another agent's cache of the same
  // namespace (a fork: a prefix donor, a subagent's parent, an implicit
  // DIVERGE; docs/api.md "Shared prefixes"), not from the agent's own.
  int64_t shared_tokens = 0;
  // Of cached_tokens: those from the first one that is not the prompt's own
  // tokenization on (a reply the model wrote as other tokens than its text's
  // tokenization, kept by characters). 0: the turn's tokens are what a cold
  // prefill of the prompt computes (docs/api.md).
  int64_t respelled_tokens = 0;
  // agentkv extension.
  std::string agent_id;  // the agent that served the request (implicit too)
  // A side request (docs/api.md "Side requests"): the agent it named, whose
  // conversation it left alone; agent_id is then its side agent. Else empty.
  std::string side_of;
  CacheState cache_state = CacheState::kCold;
  MatchType match = MatchType::kMiss;
  int64_t tokens_prefilled = 0;
  double ttft_ms = 0.0;  // request receipt to first generated token
  // Where ttft_ms went (the rest is prefill and the first decode):
  double wait_ms = 0.0;     // receipt to admission (queue, the agent's disk read, a free slot)
  double read_ms = 0.0;     // the agent's disk read (on an I/O thread; inside wait_ms)
  double restore_ms = 0.0;  // blocks -> slot (convert + copy into llama.cpp, on the inference thread)
  // The stop string that ended the reply (finish kStop); empty when it
  // ended otherwise (end of generation, length). Anthropic reports it.
  std::string stop_sequence;
};

// kToolCalls: the reply ended after one or more tool calls (OpenAI
// "tool_calls", Anthropic "tool_use").
enum class FinishReason { kStop, kLength, kCancelled, kToolCalls };

inline const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kToolCalls: return "tool_calls";
  }
  return "stop";
}

// A piece of a tool call as it is generated. Calls are numbered 0, 1, ... in
// the order the model writes them; the first delta of call `index` carries
// its id and name (both non-empty) and possibly the start of its
// arguments; later deltas of the same call have empty id and name and
// append to `arguments`. Calls arrive in index order and a call is complete
// when a delta of the next index arrives or the request finishes.
// Concatenating a call's `arguments` gives its whole JSON text.
struct ToolCallDelta {
  size_t index = 0;
  std::string id;         // first delta of a call only
  std::string name;       // first delta of a call only
  std::string arguments;  // appended text (may be empty)
};

// Receives one request's output. Implemented by api/; called by the backend.
//
// Contract for the backend, per request:
//   - calls, in order: OnStart once, OnDelta zero or more times, then exactly
//     one terminal call (OnFinish or OnError); or only OnError (e.g. the
//     prompt failed validation on the backend thread). Nothing after the
//     terminal call.
//   - OnDelta text is raw bytes of the reply; it may end inside a UTF-8 code
//     point (api/ reassembles). The concatenation of all deltas is the whole
//     reply's text content. With tools, tool-call markup is not content: it
//     arrives as OnToolCallDelta instead (interleaved with OnDelta in the
//     order the model wrote them), and the finish reason is then kToolCalls.
//     Stop strings are honoured by the backend: no delta contains a
//     stop string or anything after it (hold back a possible partial match
//     until it is resolved), finish_reason is then kStop.
//   - OnError(Status) maps to HTTP (see errors.h) if nothing was sent yet,
//     otherwise to an SSE error event. A cancelled request may end with
//     OnFinish(kCancelled, ...) or OnError(Cancelled); nobody is listening.
// Thread safety: callbacks may come from any one thread at a time; they are
// cheap (no JSON, no I/O) and never block on the client.
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  // Optional, before OnStart: the prompt's side of the usage (prompt and
  // cached tokens, agent, cache state, match; completion fields zero), known
  // once the request is admitted. Anthropic's message_start reports it.
  virtual void OnPromptUsage(const Usage& /*usage*/) {}
  virtual void OnStart() = 0;
  virtual void OnDelta(std::string_view text) = 0;
  virtual void OnToolCallDelta(const ToolCallDelta& delta) = 0;
  // The model's thinking, split out of the reply (see ReasoningFormat): raw
  // bytes like OnDelta, never part of the content. Default: dropped.
  virtual void OnReasoningDelta(std::string_view /*text*/) {}
  // With SamplingParams::top_logprobs >= 0: each sampled token's logprob, in
  // order, before the text that contains it is delivered (text may be held
  // back while it could still become a stop string). Every sampled token
  // except the end-of-generation one, including tokens that the reply's
  // parsing turns into reasoning or tool calls. Default: dropped.
  virtual void OnLogprob(const TokenLogprob& /*logprob*/) {}
  virtual void OnFinish(FinishReason reason, const Usage& usage) = 0;
  virtual void OnError(const Status& status) = 0;
};

// One agent, as the admin routes show it.
struct AgentInfo {
  std::string id;
  CacheState tier = CacheState::kCold;  // resident / hot / warm
  int64_t tokens = 0;
  int64_t ram_bytes = 0;   // Q4 bytes held in RAM (slot or pool)
  // Of ram_bytes: its pool blocks that other agents of the namespace list too
  // (a shared prefix, docs/api.md "Shared prefixes"), held once for all.
  int64_t shared_ram_bytes = 0;
  int64_t disk_bytes = 0;  // Q4 bytes in block files
  int64_t last_used_unix_ms = 0;
  bool busy = false;  // a request is in flight for this agent
};

// What api/ calls. Implemented by the scheduler (and FakeBackend in tests).
// Thread safety: every method may be called concurrently from HTTP threads.
class Backend {
 public:
  virtual ~Backend() = default;

  // The served model's name (listed by /v1/models).
  virtual std::string ModelId() const = 0;
  // What OpenAI's system_fingerprint reports: changes whenever the same
  // request could give other output (model weights, KV types, engine
  // layout). Empty until the model is loaded.
  virtual std::string SystemFingerprint() const { return ""; }
  // False while the model loads (/health answers 503, generation routes 503).
  virtual bool IsReady() const = 0;
  // Context size in tokens; a prompt of this many tokens or more is refused
  // with 413 (by Submit, which tokenizes it).
  virtual int64_t ContextTokens() const = 0;
  // A prompt whose client text (message contents, or the completion prompt)
  // exceeds this many bytes cannot fit the context whatever its content: api/
  // refuses it with 413 before anything tokenizes it. Must be an upper bound:
  // ContextTokens() x the most bytes one token can cover.
  virtual int64_t MaxPromptBytes() const = 0;

  // Queues the request. On OK the backend owns a reference to `sink` and
  // honours the GenerationSink contract; the caller may drop its own
  // reference at any time (e.g. after the client went away) and sets
  // request.cancel instead of waiting. Must not block on generation.
  // Failure (no sink callback will follow):
  //   OutOfRange        -> 400 context_length_exceeded (prompt >= ContextTokens());
  //                        its quantity() is {prompt tokens, ContextTokens()}
  //   ResourceExhausted -> 429 + Retry-After (queue full)
  //   Unavailable       -> 503 (loading, shutting down)
  //   InvalidArgument   -> 400, NotFound -> 404,
  //   FailedPrecondition / AlreadyExists -> 409 (e.g. agent busy).
  virtual Status Submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) = 0;

  // Admin; `namespace_id` scopes everything, ids are validated by api/.
  virtual Result<std::vector<AgentInfo>> ListAgents(const std::string& namespace_id) = 0;
  // NotFound -> 404.
  virtual Result<AgentInfo> GetAgent(const std::string& namespace_id, const std::string& agent_id) = 0;
  // evict_only: drop from RAM (after making sure the disk copy is complete);
  // else erase RAM and disk. NotFound -> 404, FailedPrecondition (busy) -> 409.
  virtual Status DeleteAgent(const std::string& namespace_id, const std::string& agent_id,
                             bool evict_only) = 0;

  // Prometheus text exposition (version 0.0.4) of the backend's metrics:
  // requests, TTFT by cache state, tokens prefilled/reused, matches by type,
  // bytes and agents per tier, evictions, corruption events. api/ appends its
  // own agentkv_http_* series.
  virtual std::string MetricsText() const = 0;
};

}  // namespace agentkv::api
