#pragma once
// JSON output of the measurement commands (cmd_ppl.cc, cmd_bench_*.cc).
// Header-only: cli/CMakeLists.txt compiles cmd_*.cc and a fixed list.

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/build_info.h"
#include "util/status.h"

namespace agentkv::cli {

// "--json" followed by nothing or by another flag means "--json -" (one JSON
// line on stdout, after the tables), so `--json --chunks 8` keeps --chunks.
// Returns argv with that rewrite; the strings live in *storage.
inline std::vector<char*> NormalizeJsonFlag(int argc, char** argv, std::vector<std::string>* storage) {
  storage->assign(argv, argv + argc);
  for (int i = 0; i < argc; ++i) {
    const bool bare = std::strcmp(argv[i], "--json") == 0 &&
                      (i + 1 == argc || (argv[i + 1][0] == '-' && argv[i + 1][1] != '\0'));
    if (bare) (*storage)[static_cast<size_t>(i)] = "--json=-";
  }
  std::vector<char*> out;
  for (auto& s : *storage) out.push_back(s.data());
  return out;
}

// Writes `j` (indented) to `path`, or as one compact line on stdout when path
// is "-", with a "provenance" member (build_info.h: commit, machine, date,
// binary hash) added to an object. IOError when the file cannot be written.
inline Status WriteJson(nlohmann::json j, const std::string& path) {
  if (j.is_object()) j["provenance"] = Provenance();
  if (path == "-") {
    std::printf("%s\n", j.dump().c_str());
    return std::fflush(stdout) == 0 ? Status::OK() : Status::IOError("write json: stdout");
  }
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  f.flush();
  return f ? Status::OK() : Status::IOError("write json: cannot write " + path);
}

}  // namespace agentkv::cli
