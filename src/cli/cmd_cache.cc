// agentkv cache: placeholder until the store's admin functions are wired.
#include <cstdio>

#include "cli/commands.h"

namespace agentkv::cli {

int CmdCache(int argc, char** argv) {
  std::fprintf(stderr, "agentkv cache: not built yet\n");
  return 2;
}

}  // namespace agentkv::cli
