#pragma once
// The agentkv extension object inside "usage", shared by the OpenAI and
// Anthropic response shapes (docs/api.md, "Usage and the agentkv extension").
// api/-internal: JSON never leaves this library.

#include <nlohmann/json.hpp>

#include "api/backend.h"

namespace agentkv::api {

inline nlohmann::json AgentkvUsageJson(const Usage& u) {
  nlohmann::json j = {{"agent_id", u.agent_id},
          {"cache_state", CacheStateName(u.cache_state)},
          {"match", MatchTypeName(u.match)},
          {"tokens_prefilled", u.tokens_prefilled},
          {"shared_tokens", u.shared_tokens},
          {"respelled_tokens", u.respelled_tokens},
          {"ttft_ms", u.ttft_ms},
          {"wait_ms", u.wait_ms},
          {"read_ms", u.read_ms},
          {"restore_ms", u.restore_ms}};
  if (!u.side_of.empty()) j["side_of"] = u.side_of;  // a side request (docs/api.md "Side requests")
  return j;
}

}  // namespace agentkv::api
