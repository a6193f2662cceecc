// agentkv: entry point. Dispatches to a subcommand; builds nothing itself.
#include <cstdio>
#include <cstring>

#include "cli/build_info.h"
#include "cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

constexpr Command kCommands[] = {
    {"generate", agentkv::cli::CmdGenerate, "generate text from a prompt (no cache)"},
    {"serve", agentkv::cli::CmdServe, "OpenAI-compatible server with automatic per-agent KV caches"},
    {"demo", agentkv::cli::CmdDemo, "three agents, three turns, a restart: cache states and TTFT"},
    {"run", agentkv::cli::CmdRun, "one agent turn without a server (restore, extend, generate, persist)"},
    {"cache", agentkv::cli::CmdCache, "inspect, verify or delete cached agents on disk"},
    {"synth-model", agentkv::cli::CmdSynthModel, "write a random-weight GGUF at a real model's shapes"},
    {"ppl", agentkv::cli::CmdPpl, "perplexity of a text per KV type (llama-perplexity compatible)"},
    {"bench", agentkv::cli::CmdBench, "measurements: bench store | kvtypes | ppl"},
};

void PrintUsage() {
  std::fprintf(stderr, "usage: agentkv COMMAND [options]   (agentkv COMMAND --help)\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(stderr, "  %-12s %s\n", c.name, c.help);
  std::fprintf(stderr, "  %-12s %s\n", "version", "the source commit this binary was built from");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "version") == 0 || std::strcmp(argv[1], "--version") == 0) {
    const std::string commit = agentkv::cli::BuildCommit();
    std::printf("agentkv %s%s\n", commit.c_str(), agentkv::cli::BuildDirty() ? " (uncommitted changes)" : "");
    return 0;
  }
  for (const auto& c : kCommands) {
    if (std::strcmp(argv[1], c.name) == 0) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "agentkv: unknown command '%s'\n", argv[1]);
  PrintUsage();
  return 2;
}
