// agentkv bench kvtypes: prefill and decode speed per KV cache type, side by
// side in one process (bench/kv_speed.h), with KV bytes per token.
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/kv_speed.h"
#include "bench/stats.h"
#include "cli/bench_json.h"
#include "cli/commands.h"
#include "cli/measure_command.h"
#include "cli/flags.h"
#include "engine/context.h"
#include "engine/model.h"

namespace agentkv::cli {
namespace {

constexpr const char* kUsage =
    "usage: agentkv bench kvtypes -m MODEL [--ctx 2048] [--gen 64] [--reps 5] [-t THREADS]\n"
    "                             [--kv q4_0,q8_0,f16] [-b 512] [--seed 1] [--json OUT|-]\n"
    "Per KV type (flash attention on): prefill of one prompt of --ctx random tokens in\n"
    "chunks of -b (the whole prefill timed), then --gen greedy single-token decodes.\n"
    "Types are interleaved within each repetition after one untimed warm-up each;\n"
    "median [min-max] over --reps. -t 0: all hardware threads.\n";

std::string Cell(const bench::Summary& s) { return bench::Format("%.1f [%.1f-%.1f]", s.median, s.min, s.max); }

nlohmann::json ToJson(const bench::Summary& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"n", s.n}};
}

}  // namespace

int CmdBenchKvTypes(int argc, char** argv) {
  const MeasureCommand cmd("bench kvtypes", kUsage, argc, argv);
  if (cmd.Help()) return 0;
  if (!cmd.flags().error().empty()) return cmd.UsageError(cmd.flags().error());
  const Flags& flags = cmd.flags();
  auto unknown = flags.Unknown({"m", "model", "ctx", "gen", "reps", "t", "threads", "kv", "b", "batch", "seed", "json"});
  const auto model_path = flags.Get("model", "m");
  long long n_ctx = 0, n_gen = 0, reps = 0, threads = 0, batch = 0, seed = 0;
  std::string err;
  if (!unknown.empty()) err = "unknown flag --" + unknown[0];
  if (err.empty() && !model_path) err = "-m is required";
  if (err.empty()) {
    (void)(flags.GetInt("ctx", "", 2048, &n_ctx, &err) && flags.GetInt("gen", "", 64, &n_gen, &err) &&
           flags.GetInt("reps", "", 5, &reps, &err) && flags.GetInt("threads", "t", 0, &threads, &err) &&
           flags.GetInt("batch", "b", 512, &batch, &err) && flags.GetInt("seed", "", 1, &seed, &err));
  }
  std::vector<engine::KvType> types;
  for (const std::string& item : SplitCommaList(flags.GetOr("kv", "", "q4_0,q8_0,f16"))) {
    auto kv = engine::ParseKvType(item);
    if (!kv.ok() && err.empty()) err = kv.status().message();
    if (kv.ok()) types.push_back(*kv);
  }
  if (err.empty() && (n_ctx < 1 || n_gen < 0 || reps < 1 || batch < 1)) err = "need --ctx >= 1, --gen >= 0, --reps >= 1, -b >= 1";
  if (!err.empty()) {
    return cmd.UsageError(err);
  }
  const int n_threads = threads > 0 ? static_cast<int>(threads)
                                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  auto model = engine::Model::Load(*model_path);
  if (!model.ok()) return cmd.Fail(model.status());
  std::vector<std::unique_ptr<engine::Context>> contexts;
  for (engine::KvType kv : types) {
    engine::ContextOptions co;
    co.n_slots = 1;
    co.slot_ctx = static_cast<int>(n_ctx + n_gen);
    co.n_batch = static_cast<int>(batch);
    co.type_k = co.type_v = kv;
    co.n_threads = n_threads;
    auto ctx = engine::Context::Create(**model, co);
    if (!ctx.ok()) return cmd.Fail(ctx.status());
    contexts.push_back(std::move(ctx).value());
  }
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::uniform_int_distribution<int32_t> dist(3, std::max(3, (*model)->info().n_vocab - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(n_ctx));
  for (auto& t : prompt) t = dist(rng);
  std::fprintf(stderr, "bench kvtypes: %s, prompt %lld tokens (chunks of %lld), %lld decoded, %d threads, %lld reps\n",
               (*model)->info().name.c_str(), n_ctx, batch, n_gen, n_threads, reps);

  const std::span<const int32_t> warm_prompt(prompt.data(), std::min<size_t>(prompt.size(), 512));
  for (size_t i = 0; i < types.size(); ++i) {
    if (auto w = bench::MeasureKvSpeed(*contexts[i], warm_prompt, static_cast<int>(std::min(n_gen, 4LL))); !w.ok()) {
      return cmd.Fail(w.status());
    }
  }
  std::vector<std::vector<double>> prefill(types.size()), decode(types.size());
  nlohmann::json samples = nlohmann::json::array();
  for (long long rep = 0; rep < reps; ++rep) {
    for (size_t i = 0; i < types.size(); ++i) {
      auto s = bench::MeasureKvSpeed(*contexts[i], prompt, static_cast<int>(n_gen));
      if (!s.ok()) return cmd.Fail(s.status());
      prefill[i].push_back(s->PrefillTokPerS());
      if (n_gen > 0) decode[i].push_back(s->DecodeTokPerS());
      std::fprintf(stderr, "rep %lld %-5s prefill %.1f ms (%.1f tok/s), decode %.1f ms (%.1f tok/s)\n", rep + 1,
                   engine::KvTypeName(types[i]), s->prefill_ms, s->PrefillTokPerS(), s->decode_ms, s->DecodeTokPerS());
      samples.push_back({{"rep", rep + 1}, {"kv", engine::KvTypeName(types[i])}, {"prefill_ms", s->prefill_ms},
                         {"decode_ms", s->decode_ms}});
    }
  }

  // Ratios are against q4_0 (the pool and disk type) when it was measured.
  int base = -1;
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] == engine::KvType::kQ4_0) base = static_cast<int>(i);
  }
  std::vector<std::vector<std::string>> rows;
  nlohmann::json jr = nlohmann::json::array();
  for (size_t i = 0; i < types.size(); ++i) {
    const auto p = bench::Summarize(prefill[i]);
    const auto d = bench::Summarize(decode[i]);
    const uint64_t bpt = contexts[i]->spec().BytesPerToken(types[i], types[i]);
    std::string p_ratio = "-", d_ratio = "-";
    if (base >= 0) {
      const auto pb = bench::Summarize(prefill[static_cast<size_t>(base)]);
      const auto db = bench::Summarize(decode[static_cast<size_t>(base)]);
      if (pb.median > 0) p_ratio = bench::Format("%.2fx", p.median / pb.median);
      if (db.median > 0) d_ratio = bench::Format("%.2fx", d.median / db.median);
    }
    rows.push_back({engine::KvTypeName(types[i]), std::to_string(bpt), Cell(p), p_ratio, n_gen > 0 ? Cell(d) : "-",
                    d_ratio});
    jr.push_back({{"kv", engine::KvTypeName(types[i])}, {"kv_bytes_per_token", bpt},
                  {"prefill_tok_per_s", ToJson(p)}, {"decode_tok_per_s", ToJson(d)}});
  }
  std::printf("%s", bench::MarkdownTable({"KV", "KV bytes/token", "prefill tok/s median [min-max]", "prefill vs q4_0",
                                          "decode tok/s median [min-max]", "decode vs q4_0"},
                                         rows)
                        .c_str());
  if (auto out = flags.Get("json")) {
    nlohmann::json j = {{"benchmark", "kvtypes"}, {"model", (*model)->info().name}, {"ctx", n_ctx},
                        {"gen", n_gen},           {"batch", batch},                 {"threads", n_threads},
                        {"reps", reps},           {"flash_attn", true},             {"results", jr},
                        {"samples", samples}};
    if (Status s = WriteJson(j, *out); !s.ok()) return cmd.Fail(s);
  }
  return 0;
}

}  // namespace agentkv::cli
