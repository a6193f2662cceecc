#pragma once
// Plain POSIX file I/O: the baseline the disk tier is measured against, and
// page-cache control for cold reads. Benchmarks only; the store itself goes
// through store/file_system.h.
//
// Thread safety: stateless; safe from any thread on distinct paths.

#include <cstdint>
#include <span>
#include <string>

#include "util/status.h"

namespace agentkv::bench {

// Creates or truncates `path`, write()s `data` in full, fsync()s and closes
// it. IOError "<op>: <path>: <strerror>" on any failure.
Status WriteFileSynced(const std::string& path, std::span<const uint8_t> data);

// Reads `path` from start to end with read() into one reused buffer of
// buffer_bytes; returns the bytes read. IOError on failure.
Result<uint64_t> ReadFileSequential(const std::string& path, size_t buffer_bytes = 1 << 20);

// Asks the kernel to drop `path`'s pages from the page cache: fdatasync (dirty
// pages cannot be dropped) then posix_fadvise(POSIX_FADV_DONTNEED). OK means
// the advice was accepted, not that the pages are gone: check with
// ResidentFraction. IOError on failure.
Status DropFromPageCache(const std::string& path);

// Fraction [0, 1] of `path`'s pages resident in the page cache (mmap +
// mincore); 0 for an empty file. IOError on failure.
Result<double> ResidentFraction(const std::string& path);

}  // namespace agentkv::bench
