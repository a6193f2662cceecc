// agentkv generate: one prompt, no cache; prints the generated text.
#include <chrono>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/flags.h"
#include "engine/context.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/tokenizer.h"

namespace agentkv::cli {
namespace {

constexpr const char* kUsage =
    "usage: agentkv generate -m MODEL -p PROMPT [-n N] [--kv q4_0|q8_0|f16] [--temp T]\n"
    "                        [--top-k K] [--top-p P] [--seed S] [-t THREADS] [-c CTX]\n";

int Fail(const Status& s) {
  std::fprintf(stderr, "agentkv generate: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int CmdGenerate(int argc, char** argv) {
  Flags flags(argc, argv, {"help"});
  if (flags.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  auto unknown = flags.Unknown({"m", "model", "p", "prompt", "n", "kv", "temp", "top-k", "top-p", "seed", "t",
                                "threads", "c", "ctx"});
  auto model_path = flags.Get("model", "m");
  auto prompt = flags.Get("prompt", "p");
  long long n = 0, seed = 0, top_k = 0, threads = 0, ctx_size = 0;
  double temp = 0, top_p = 1;
  std::string err;
  if (!unknown.empty()) err = "unknown flag --" + unknown[0];
  if (!flags.error().empty()) err = flags.error();
  if (err.empty() && (!model_path || !prompt)) err = "-m and -p are required";
  if (err.empty() &&
      !(flags.GetInt("n", "n", 64, &n, &err) && flags.GetInt("seed", "", 0, &seed, &err) &&
        flags.GetInt("top-k", "", 0, &top_k, &err) && flags.GetInt("threads", "t", 0, &threads, &err) &&
        flags.GetInt("ctx", "c", 2048, &ctx_size, &err) && flags.GetFloat("temp", "", 0.0, &temp, &err) &&
        flags.GetFloat("top-p", "", 1.0, &top_p, &err))) {
  }
  auto kv = engine::ParseKvType(flags.GetOr("kv", "", "q4_0"));
  if (err.empty() && !kv.ok()) err = kv.status().message();
  if (!err.empty()) {
    std::fprintf(stderr, "agentkv generate: %s\n%s", err.c_str(), kUsage);
    return 2;
  }
  auto model = engine::Model::Load(*model_path);
  if (!model.ok()) return Fail(model.status());
  engine::ContextOptions options;
  options.n_slots = 1;
  options.slot_ctx = static_cast<int>(ctx_size);
  options.type_k = options.type_v = *kv;
  options.n_threads = static_cast<int>(threads);
  auto ctx = engine::Context::Create(**model, options);
  if (!ctx.ok()) return Fail(ctx.status());
  engine::Tokenizer tokenizer(**model);
  auto tokens = tokenizer.Tokenize(*prompt, true).tokens;
  if (tokens.size() + static_cast<size_t>(n) > static_cast<size_t>(ctx_size)) {
    return Fail(Status::InvalidArgument("prompt of " + std::to_string(tokens.size()) + " tokens + " +
                                        std::to_string(n) + " > context " + std::to_string(ctx_size)));
  }
  engine::Sampler sampler({static_cast<float>(temp), static_cast<int32_t>(top_k), static_cast<float>(top_p),
                           static_cast<uint64_t>(seed)});
  const auto t0 = std::chrono::steady_clock::now();
  // Prefill in n_batch chunks, logits for the last token only.
  std::vector<engine::BatchItem> batch;
  int32_t pos = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.push_back({0, tokens[i], pos++, i + 1 == tokens.size()});
    if (static_cast<int>(batch.size()) == options.n_batch || i + 1 == tokens.size()) {
      if (Status s = (*ctx)->Decode(batch); !s.ok()) return Fail(s);
      if (i + 1 != tokens.size()) batch.clear();
    }
  }
  int last = static_cast<int>(batch.size()) - 1;
  double ttft_ms = 0;
  std::fputs(prompt->c_str(), stdout);
  for (long long i = 0; i < n; ++i) {
    const int32_t tok = sampler.Sample((*ctx)->Logits(last)).value();  // no grammar: never fails
    if (i == 0) ttft_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (tokenizer.IsEndOfGeneration(tok)) break;
    std::fputs(tokenizer.Piece(tok).c_str(), stdout);
    std::fflush(stdout);
    engine::BatchItem item{0, tok, pos++, true};
    if (Status s = (*ctx)->Decode({&item, 1}); !s.ok()) return Fail(s);
    last = 0;
  }
  std::fputs("\n", stdout);
  const double total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "prompt %zu tokens, ttft %.1f ms, total %.1f ms, kv %s\n", tokens.size(), ttft_ms, total_ms,
               engine::KvTypeName(*kv));
  return 0;
}

}  // namespace agentkv::cli
