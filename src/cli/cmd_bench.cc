// agentkv bench: dispatches to the measurement subcommands.
#include <cstdio>
#include <cstring>

#include "cli/commands.h"

namespace agentkv::cli {
namespace {

struct BenchCommand {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

constexpr BenchCommand kBenchCommands[] = {
    {"ppl", CmdPpl, "perplexity per KV type, llama-perplexity compatible (same as `agentkv ppl`)"},
    {"store", CmdBenchStore, "disk tier save/load MB/s vs plain write+fsync and read of the same bytes"},
    {"kvtypes", CmdBenchKvTypes, "prefill and decode tok/s with q4_0, q8_0, f16 KV side by side"},
    {"restore", CmdBenchRestore, "restore/export path GB/s by stage (blocks <-> llama state <-> KV tensors)"},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: agentkv bench BENCHMARK [options]   (agentkv bench BENCHMARK --help)\n\nbenchmarks:\n");
  for (const auto& c : kBenchCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.help);
}

}  // namespace

int CmdBench(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : kBenchCommands) {
    if (std::strcmp(argv[1], c.name) == 0) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "agentkv bench: unknown benchmark '%s'\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}

}  // namespace agentkv::cli
