// agentkv serve: the OpenAI-compatible server.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/server_flags.h"
#include "cli/server_stack.h"
#include "util/log.h"

namespace agentkv::cli {

int CmdServe(int argc, char** argv) {
  Flags flags(argc, argv, kServerBooleanFlags);
  if (flags.Has("help")) {
    std::fputs(kServeUsage, stdout);
    return 0;
  }
  ServerConfig config;
  std::string err;
  if (!ParseServerConfig(flags, &config, &err)) {
    std::fprintf(stderr, "agentkv serve: %s\n%s", err.c_str(), kServeUsage);
    return 2;
  }
  // Block the signals before any thread starts; the main thread waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto stack = ServerStack::Start(config);
  if (!stack.ok()) {
    std::fprintf(stderr, "agentkv serve: %s\n", stack.status().ToString().c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&set, &sig);
  AKV_LOG_INFO("signal %d: shutting down (finishing in-flight work, flushing saves)", sig);
  (*stack)->Stop();
  AKV_LOG_INFO("bye");
  return 0;
}

}  // namespace agentkv::cli
