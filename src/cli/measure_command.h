#pragma once
// The frame shared by the measurement subcommands (agentkv ppl, agentkv
// bench store|kvtypes|restore): flags with `--json` normalized (bench_json.h),
// --help, usage errors (exit 2) and failures (exit 1) printed under the
// command's name. Header-only: cli/CMakeLists.txt compiles cmd_*.cc and a
// fixed list.

#include <cstdio>
#include <string>
#include <vector>

#include "cli/bench_json.h"
#include "cli/flags.h"
#include "util/status.h"

namespace agentkv::cli {

class MeasureCommand {
 public:
  // name: as the user typed it after "agentkv", e.g. "bench restore".
  MeasureCommand(std::string name, const char* usage, int argc, char** argv)
      : name_(std::move(name)),
        usage_(usage),
        args_(NormalizeJsonFlag(argc, argv, &arg_storage_)),
        flags_(static_cast<int>(args_.size()), args_.data(), {"help"}) {}
  MeasureCommand(const MeasureCommand&) = delete;  // args_ points into arg_storage_
  MeasureCommand& operator=(const MeasureCommand&) = delete;

  const Flags& flags() const { return flags_; }
  // With --help: prints the usage to stdout and returns true (exit 0).
  bool Help() const {
    if (!flags_.Has("help")) return false;
    std::fputs(usage_, stdout);
    return true;
  }
  // A bad command line: the error and the usage on stderr; returns 2.
  int UsageError(const std::string& error) const {
    std::fprintf(stderr, "agentkv %s: %s\n%s", name_.c_str(), error.c_str(), usage_);
    return 2;
  }
  // A failed measurement: the status on stderr; returns 1.
  int Fail(const Status& s) const {
    std::fprintf(stderr, "agentkv %s: %s\n", name_.c_str(), s.ToString().c_str());
    return 1;
  }

 private:
  std::string name_;
  const char* usage_;
  std::vector<std::string> arg_storage_;  // before args_: args_ points into it
  std::vector<char*> args_;
  Flags flags_;
};

}  // namespace agentkv::cli
