#pragma once
// Where a binary and a measurement came from: the source commit it was built
// from and the machine, date and binary it ran on. Every JSON a measurement
// command writes carries Provenance() (bench_json.h WriteJson).

#include <string>

#include <nlohmann/json.hpp>

namespace agentkv::cli {

// The commit of the source tree at build time (cmake/git_commit.cmake), and
// whether src/, cmake/, patches/ or CMakeLists.txt had uncommitted changes.
std::string BuildCommit();
bool BuildDirty();

// {"commit", "dirty", "date" (local ISO 8601 with offset), "hostname",
//  "cpu_model", "logical_cpus", "ram_bytes", "loadavg", "boot_id" (the
//  kernel's per-boot UUID, "" where unreadable), "binary": {"path",
//  "bytes", "sha256"}}. Hashes the running binary (/proc/self/exe) once per
// call: tens of milliseconds; meant for the end of a measurement, not a loop.
nlohmann::json Provenance();

}  // namespace agentkv::cli
