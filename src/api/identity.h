#pragma once
// Agent ids and namespace names: the rules that keep client-chosen names
// safe to use as directory names (DESIGN §5).

#include <string>
#include <string_view>

#include "util/status.h"

namespace agentkv::api {

constexpr size_t kMaxAgentIdBytes = 128;

// OK iff `id` is 1..128 characters of [A-Za-z0-9._-], does not start with
// '.', and so is neither "." nor "..". InvalidArgument otherwise; the message
// names `what` (e.g. "X-Agent-Id") and never echoes more than 64 bytes.
Status ValidateAgentId(std::string_view id, std::string_view what);

// Namespace names follow the same rule.
inline Status ValidateNamespace(std::string_view ns) { return ValidateAgentId(ns, "namespace"); }

}  // namespace agentkv::api
