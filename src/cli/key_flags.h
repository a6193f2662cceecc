#pragma once
// The server's key flags: --api-key (repeatable), --api-key-file and
// --admin-key, with their AGENTKV_* environment fallbacks.

#include <string>
#include <vector>

#include "cli/flags.h"

namespace agentkv::cli {

// Appends every tenant key to *api_keys and sets *admin_key (left as it is
// when --admin-key is absent). Sources: each --api-key (repeatable; each
// value comma-separated), else AGENTKV_API_KEY; then every line of
// --api-key-file (comma-separated; blank lines skipped). Items are trimmed
// of spaces, tabs and line ends.
// Returns false with *error set when a key source is given but names an
// empty key ("--api-key ''", "--api-key ' , '", "a,,b", AGENTKV_API_KEY=""),
// when --api-key-file cannot be read or holds no key, or when the admin key
// is given but empty: an empty key must never start a server with no
// authentication (or a key nobody chose).
bool ParseKeyFlags(const Flags& flags, std::vector<std::string>* api_keys, std::string* admin_key,
                   std::string* error);

}  // namespace agentkv::cli
