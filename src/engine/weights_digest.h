#pragma once
// WeightsDigest: XXH3-64 over every byte of a model file's tensor data, so
// that any edited weight changes the model fingerprint (a sample of the data
// can miss an edit and reuse stale KV).
//
// Hashing reads the whole data section once (cost: see docs/engine.md); the
// result is cached in `cache_dir`, one small file per model path, keyed by
// the file's (path, size, mtime, ctime, inode, device) and the data offset,
// so an unchanged file is not read again on the next start. ctime is in the
// key because an edit can restore mtime but never ctime. A file modified less
// than kRacyWindowNs before hashing finished is hashed but not cached: its
// timestamps may not yet tell a later edit apart (git's "racily clean" rule).
//
// Cache files are written to a temp file and renamed, not fsynced: a lost or
// torn entry (it fails to parse) costs one rehash, nothing else.
// Thread safety: stateless functions; concurrent calls for one model may both
// hash and both write the same entry.

#include <cstdint>
#include <functional>
#include <string>

#include "util/status.h"

namespace agentkv::engine {

inline constexpr int64_t kRacyWindowNs = 2'000'000'000;

struct WeightsDigestOptions {
  std::string cache_dir;               // "" = no cache: hash on every call, write nothing
  std::function<int64_t()> now_ns;     // Unix ns for the racy rule; nullptr: system clock
};

struct WeightsDigest {
  uint64_t xxh3 = 0;          // XXH3-64 of bytes [data_begin, file size)
  bool from_cache = false;    // read from the cache, no weight byte read
  uint64_t bytes_hashed = 0;  // weight bytes read by this call (0 from the cache)
};

// The digest of `path`'s bytes from `data_begin` to its end. IOError if the
// file cannot be read or changed while it was hashed; InvalidArgument if
// data_begin is past its end. A cache that cannot be read or written is
// ignored (logged), never an error.
Result<WeightsDigest> DigestWeights(const std::string& path, uint64_t data_begin, const WeightsDigestOptions& options);

}  // namespace agentkv::engine
