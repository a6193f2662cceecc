#pragma once
// Manifest: an AgentRecord as a self-checksummed JSON document.
//
//   {"checksum":"<16 hex>","format":"agentkv.manifest.v1","record":{...}}
//
// checksum = XXH3-64 of the compact dump of "record" (keys sorted), so any
// change to the record is detected. Pure functions; thread-safe.

#include <string>
#include <string_view>

#include "store/agent_record.h"
#include "util/status.h"

namespace agentkv {

inline constexpr std::string_view kManifestFormat = "agentkv.manifest.v1";

// REQUIRES: nothing; the text may hold any bytes (non-UTF-8 text is stored
// base64-encoded). InvalidArgument if spans.size() != tokens.size().
Result<std::string> EncodeManifest(const AgentRecord& record);

// Parses and verifies a manifest: well-formed JSON, format, checksum, every
// field present and typed, one span per token inside the text, block list
// consistent with the tokens (count, n_tokens, ids recomputed from the tokens
// and the fingerprint). Any failure: Corruption("manifest: ..."). Never
// throws or crashes.
Result<AgentRecord> DecodeManifest(std::string_view bytes);

// Validates a record's own consistency as DecodeManifest does: spans always,
// the block list too if `check_blocks`.
// Returns InvalidArgument, for use on records coming from callers.
Status CheckRecord(const AgentRecord& record, bool check_blocks);

}  // namespace agentkv
