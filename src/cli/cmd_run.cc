// agentkv run: one agent turn without a server. The prompt is the agent's
// whole text so far; the cache is restored (resident/hot/warm/cold), extended
// with the prompt, the reply generated, and everything persisted.
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/server_flags.h"
#include "cli/server_stack.h"

namespace agentkv::cli {
namespace {

constexpr const char* kUsage =
    "usage: agentkv run -m MODEL --cache-dir DIR --agent ID -p PROMPT [-n N] [--namespace NS]\n"
    "                   [--kv q4_0] [-c CTX] [-t THREADS] [--temp T] [--seed S]\n"
    "Prints the reply on stdout; cache state, tokens reused/prefilled and TTFT on stderr.\n";

// Streams deltas to stdout and remembers how the request ended.
class PrintingSink : public api::GenerationSink {
 public:
  void OnStart() override {}
  void OnDelta(std::string_view text) override {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  // `run` sends no tools, so no calls arrive; print them readably if they do.
  void OnToolCallDelta(const api::ToolCallDelta& d) override {
    if (!d.name.empty()) std::fprintf(stdout, "\n[tool call %s] ", d.name.c_str());
    std::fwrite(d.arguments.data(), 1, d.arguments.size(), stdout);
    std::fflush(stdout);
  }
  void OnFinish(api::FinishReason reason, const api::Usage& usage) override {
    std::lock_guard<std::mutex> l(mu_);
    usage_ = usage;
    reason_ = reason;
    done_ = true;
    cv_.notify_all();
  }
  void OnError(const Status& s) override {
    std::lock_guard<std::mutex> l(mu_);
    error_ = s;
    done_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_; });
  }
  api::Usage usage_;
  api::FinishReason reason_ = api::FinishReason::kStop;
  Status error_;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace

int CmdRun(int argc, char** argv) {
  Flags flags(argc, argv, kServerBooleanFlags);
  if (flags.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  ServerConfig config;
  std::string err;
  const bool ok = ParseServerConfig(flags, &config, &err, true, {"agent", "p", "prompt", "n", "namespace", "temp", "seed"});
  auto agent = flags.Get("agent");
  auto prompt = flags.Get("prompt", "p");
  long long n = 0, seed = 0;
  double temp = 0;
  if (ok && (!agent || !prompt || config.cache_dir.empty())) err = "--cache-dir, --agent and -p are required";
  if (!ok || !err.empty() || !flags.GetInt("n", "n", 32, &n, &err) || !flags.GetInt("seed", "", 0, &seed, &err) ||
      !flags.GetFloat("temp", "", 0.0, &temp, &err)) {
    std::fprintf(stderr, "agentkv run: %s\n%s", err.c_str(), kUsage);
    return 2;
  }
  config.http = false;
  config.quiet = true;
  config.n_slots = 1;
  auto stack = ServerStack::Start(config);
  if (!stack.ok()) {
    std::fprintf(stderr, "agentkv run: %s\n", stack.status().ToString().c_str());
    return 1;
  }
  api::GenerationRequest req;
  req.request_id = "run";
  req.namespace_id = flags.GetOr("namespace", "", "default");
  req.agent_id = *agent;
  req.kind = api::RequestKind::kCompletion;
  req.prompt = *prompt;
  req.sampling.max_tokens = static_cast<int32_t>(n);
  req.sampling.temperature = static_cast<float>(temp);
  req.sampling.seed = seed;
  auto sink = std::make_shared<PrintingSink>();
  if (Status s = (*stack)->scheduler().Submit(req, sink); !s.ok()) {
    std::fprintf(stderr, "agentkv run: %s\n", s.ToString().c_str());
    return 1;
  }
  sink->Wait();
  std::fputs("\n", stdout);
  (*stack)->Stop();  // flushes the save
  if (!sink->error_.ok()) {
    std::fprintf(stderr, "agentkv run: %s\n", sink->error_.ToString().c_str());
    return 1;
  }
  const api::Usage& u = sink->usage_;
  std::fprintf(stderr,
               "agent %s: cache %s, match %s, prompt %lld tokens (reused %lld, prefilled %lld), generated %lld, "
               "ttft %.1f ms\n",
               u.agent_id.c_str(), api::CacheStateName(u.cache_state), api::MatchTypeName(u.match),
               static_cast<long long>(u.prompt_tokens), static_cast<long long>(u.cached_tokens),
               static_cast<long long>(u.tokens_prefilled), static_cast<long long>(u.completion_tokens), u.ttft_ms);
  return 0;
}

}  // namespace agentkv::cli
