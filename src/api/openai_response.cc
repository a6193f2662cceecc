// Response bodies. Shapes follow OpenAI's API reference; the agentkv object
// inside usage is our extension (docs/api.md).

#include <nlohmann/json.hpp>

#include "api/openai_json.h"
#include "api/usage_json.h"

namespace agentkv::api {
namespace {

using nlohmann::json;

std::string Dump(const json& j) {
  // Text is sanitized upstream; `replace` is a last line of defence so that
  // dump() can never throw on a handler thread.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json UsageObject(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"agentkv", AgentkvUsageJson(u)}};
}

json Envelope(const ResponseMeta& meta, bool chunk) {
  const bool chat = meta.kind == RequestKind::kChat;
  return {{"id", meta.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", meta.system_fingerprint}};
}

json Bytes(const std::string& token) {
  json b = json::array();
  for (unsigned char c : token) b.push_back(int(c));
  return b;
}

// The choice's "logprobs": null when not asked for. Chat:
// {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}],
//  "refusal": null}; completions (legacy): {tokens, token_logprobs,
// top_logprobs: [{token: logprob}], text_offset}.
json LogprobsJson(const ResponseMeta& meta, const std::vector<TokenLogprob>& lps, int64_t text_offset) {
  if (meta.top_logprobs < 0) return nullptr;
  if (meta.kind == RequestKind::kChat) {
    json content = json::array();
    for (const TokenLogprob& t : lps) {
      json top = json::array();
      for (const TokenLogprob::Alternative& a : t.top) {
        top.push_back({{"token", a.token}, {"logprob", a.logprob}, {"bytes", Bytes(a.token)}});
      }
      content.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", Bytes(t.token)}, {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : lps) {
    tokens.push_back(t.token);
    token_logprobs.push_back(t.logprob);
    json top = json::object();
    for (const TokenLogprob::Alternative& a : t.top) top[a.token] = a.logprob;
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(t.token.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json Finish(std::optional<FinishReason> r) {
  return r ? json(FinishReasonName(*r)) : json(nullptr);
}

}  // namespace

std::string CompletionJson(const ResponseMeta& meta, std::string_view reasoning, std::string_view text,
                           const std::vector<ToolCall>& tool_calls, FinishReason finish, const Usage& usage,
                           const std::vector<TokenLogprob>& logprobs) {
  json j = Envelope(meta, false);
  json choice = {{"index", 0}, {"logprobs", LogprobsJson(meta, logprobs, 0)}, {"finish_reason", Finish(finish)}};
  if (meta.kind == RequestKind::kChat) {
    const json content = text.empty() && !tool_calls.empty() ? json(nullptr) : json(text);
    choice["message"] = {{"role", "assistant"}, {"content", content}, {"refusal", nullptr}};
    if (!reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) {
      json calls = json::array();
      for (const ToolCall& c : tool_calls) {
        calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      }
      choice["message"]["tool_calls"] = std::move(calls);
    }
  } else {
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  j["usage"] = UsageObject(usage);
  return Dump(j);
}

std::string ChunkJson(const ResponseMeta& meta, const ChunkFields& f) {
  json j = Envelope(meta, true);
  json choice = {{"index", 0}, {"logprobs", LogprobsJson(meta, f.logprobs, f.text_offset)},
                 {"finish_reason", Finish(f.finish)}};
  if (meta.kind == RequestKind::kChat) {
    json delta = json::object();
    if (f.role) delta["role"] = "assistant";
    if (f.content) delta["content"] = *f.content;
    if (f.reasoning_content) delta["reasoning_content"] = *f.reasoning_content;
    if (f.tool_call) {
      const ToolCallDelta& d = *f.tool_call;
      json call = {{"index", d.index}};
      json fn = {{"arguments", d.arguments}};
      if (!d.id.empty()) {
        call["id"] = d.id;
        call["type"] = "function";
        fn["name"] = d.name;
      }
      call["function"] = std::move(fn);
      delta["tool_calls"] = json::array({std::move(call)});
    }
    choice["delta"] = delta;
  } else {
    choice["text"] = f.content.value_or("");
  }
  j["choices"] = json::array({choice});
  if (f.usage_null) j["usage"] = nullptr;
  return Dump(j);
}

std::string UsageChunkJson(const ResponseMeta& meta, const Usage& usage) {
  json j = Envelope(meta, true);
  j["choices"] = json::array();
  j["usage"] = UsageObject(usage);
  return Dump(j);
}

std::string ModelsJson(const std::vector<std::string>& ids, int64_t created) {
  json data = json::array();
  for (const std::string& id : ids) {
    data.push_back({{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "agentkv"}});
  }
  return Dump({{"object", "list"}, {"data", data}});
}

namespace {

json AgentObject(const AgentInfo& a) {
  return {{"id", a.id},
          {"object", "agent"},
          {"tier", CacheStateName(a.tier)},
          {"tokens", a.tokens},
          {"bytes", a.ram_bytes > a.disk_bytes ? a.ram_bytes : a.disk_bytes},
          {"ram_bytes", a.ram_bytes},
          {"shared_ram_bytes", a.shared_ram_bytes},
          {"disk_bytes", a.disk_bytes},
          {"last_used_ms", a.last_used_unix_ms},
          {"busy", a.busy}};
}

}  // namespace

std::string AgentJson(const AgentInfo& agent) { return Dump(AgentObject(agent)); }

std::string AgentListJson(const std::vector<AgentInfo>& agents) {
  json data = json::array();
  for (const AgentInfo& a : agents) data.push_back(AgentObject(a));
  return Dump({{"object", "list"}, {"data", data}});
}

std::string AgentDeletedJson(const std::string& id, bool evict_only) {
  return Dump({{"id", id}, {"object", "agent.deleted"}, {"deleted", !evict_only}, {"evicted", evict_only}});
}

}  // namespace agentkv::api
