#pragma once
// The one rule for client-chosen names: agent ids, namespaces and model
// fingerprints become directory and key names (DESIGN §5), so they must be
// safe as such on every file system and in every tier.

#include <cstddef>
#include <string_view>

#include "util/status.h"

namespace agentkv {

inline constexpr size_t kMaxNameBytes = 128;

// OK iff `name` is 1..128 bytes of [A-Za-z0-9._-] and does not start with
// '.' (so it is neither "." nor ".."). Pure: touches no file. Otherwise
// InvalidArgument "<what>: ..."; the message never echoes more than 64 bytes
// of `name`, and none of its bytes outside the allowed set.
Status ValidateName(std::string_view what, std::string_view name);

}  // namespace agentkv
