// agentkv ppl: perplexity of a text file for one or more KV cache types,
// scored like llama.cpp's llama-perplexity (bench/perplexity.h).
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/perplexity.h"
#include "bench/stats.h"
#include "cli/bench_json.h"
#include "cli/commands.h"
#include "cli/measure_command.h"
#include "cli/flags.h"
#include "engine/context.h"
#include "engine/model.h"
#include "engine/tokenizer.h"

namespace agentkv::cli {
namespace {

constexpr const char* kUsage =
    "usage: agentkv ppl -m MODEL -f TEXT [-c 512] [--stride S] [--kv q4_0|q8_0|f16|all]\n"
    "                   [--slot-kv f16|q8_0|q4_0]\n"
    "                   [--chunks N] [-b 512] [-t THREADS] [--json OUT|-]\n"
    "Tokenizes TEXT (minus one trailing newline, as llama.cpp's -f) with BOS and\n"
    "scores windows of c tokens, the first token of each replaced by BOS,\n"
    "log-softmax accumulated in double precision:\n"
    "  default     llama-perplexity's chunks: n_tokens / c non-overlapping windows,\n"
    "              the second half of each scored (c/2 - 1 tokens per window);\n"
    "              numbers comparable with `llama-perplexity -c C -fa on`\n"
    "  --stride S  sliding windows of c tokens every S tokens (0 < S < c), the last S\n"
    "              tokens of each scored: every token from c-S on, once, with\n"
    "              >= c-S-1 tokens of context (e.g. -c 1024 --stride 512)\n"
    "--chunks N limits the number of windows; -b is the decode batch (<= c);\n"
    "--kv all runs f16, q8_0, q4_0 and the hybrid (f16 slots, q4_0 at rest) in one process and\n"
    "reports delta and top-1 agreement vs f16 (the share of scored tokens whose argmax is f16's).\n"
    "--slot-kv T with --kv K (T != K): hybrid slots, slots in T, blocks in K; each window's context\n"
    "(the positions before the first scored one) goes to K-blocks and back (export + import, as a\n"
    "restored agent's cache did), then the scored half is decoded on top of it in T.\n"
    "Default: --slot-kv = --kv (no round trip; ppl does not pick per backend).\n"
    "--json - (or a bare --json) prints the JSON as the last line of stdout.\n";

// Like MeasureCommand::Fail, but an invalid argument found after parsing
// (e.g. a window larger than the model's context) exits 2, like a usage error.
int Fail(const MeasureCommand& cmd, const Status& s) {
  const int rc = cmd.Fail(s);
  return s.code() == StatusCode::kInvalidArgument ? 2 : rc;
}

Result<std::string> ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound("read text: " + path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  // llama.cpp's -f drops one trailing newline; so do we, for equal token counts.
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// One configuration: the KV type at rest and in the slots (equal: plain).
struct KvConfig {
  engine::KvType rest;
  engine::KvType slot;
  bool hybrid() const { return rest != slot; }
  std::string Label() const {
    return hybrid() ? std::string(engine::KvTypeName(slot)) + " slots/" + engine::KvTypeName(rest) + " at rest"
                    : engine::KvTypeName(rest);
  }
};

struct TypeResult {
  KvConfig kv;
  bench::PplResult r;
};

}  // namespace

int CmdPpl(int argc, char** argv) {
  const MeasureCommand cmd("ppl", kUsage, argc, argv);
  if (cmd.Help()) return 0;
  if (!cmd.flags().error().empty()) return cmd.UsageError(cmd.flags().error());
  const Flags& flags = cmd.flags();
  auto unknown = flags.Unknown({"m", "model", "f", "file", "c", "ctx", "stride", "kv", "slot-kv", "chunks", "b", "batch", "t",
                                "threads", "json"});
  const auto model_path = flags.Get("model", "m");
  const auto text_path = flags.Get("file", "f");
  long long n_ctx = 0, stride = 0, chunks = 0, batch = 0, threads = 0;
  std::string err;
  if (!unknown.empty()) err = "unknown flag --" + unknown[0];
  if (err.empty() && (!model_path || !text_path)) err = "-m and -f are required";
  if (err.empty()) {
    (void)(flags.GetInt("ctx", "c", 512, &n_ctx, &err) && flags.GetInt("stride", "", 0, &stride, &err) &&
           flags.GetInt("chunks", "", 0, &chunks, &err) && flags.GetInt("batch", "b", 512, &batch, &err) &&
           flags.GetInt("threads", "t", 0, &threads, &err));
  }
  std::vector<KvConfig> types;
  const std::string kv_flag = flags.GetOr("kv", "", "q4_0");
  std::optional<engine::KvType> slot_kv;
  if (auto sk = flags.Get("slot-kv")) {
    auto t = engine::ParseKvType(*sk);
    if (t.ok()) {
      slot_kv = *t;
    } else if (err.empty()) {
      err = "--slot-kv: " + t.status().message();
    }
  }
  using engine::KvType;
  if (kv_flag == "all") {
    if (slot_kv && err.empty()) err = "--kv all includes the hybrid (f16 slots, q4_0 at rest); no --slot-kv with it";
    types = {{KvType::kF16, KvType::kF16}, {KvType::kQ8_0, KvType::kQ8_0}, {KvType::kQ4_0, KvType::kQ4_0},
             {KvType::kQ4_0, KvType::kF16}};
  } else if (auto kv = engine::ParseKvType(kv_flag); kv.ok()) {
    types = {{*kv, slot_kv.value_or(*kv)}};
  } else if (err.empty()) {
    err = kv.status().message();
  }
  if (err.empty() && (n_ctx < 4 || n_ctx > 1 << 20)) err = "-c must be 4..1048576";
  if (err.empty() && (batch < 1)) err = "-b must be >= 1";
  if (err.empty() && (stride < 0 || stride >= n_ctx)) err = "--stride must be 0 (chunks) or 1..c-1";
  if (err.empty() && chunks < 0) err = "--chunks must be >= 0";
  if (!err.empty()) {
    return cmd.UsageError(err);
  }
  bench::PplOptions options{static_cast<int>(n_ctx), static_cast<int>(stride), static_cast<int>(chunks)};
  options.round_trip_context = true;  // only hybrid configurations round-trip (PplOptions)

  auto model = engine::Model::Load(*model_path);
  if (!model.ok()) return Fail(cmd, model.status());
  auto text = ReadText(*text_path);
  if (!text.ok()) return Fail(cmd, text.status());
  engine::Tokenizer tokenizer(**model);
  const std::vector<int32_t> tokens = tokenizer.Tokenize(*text, true).tokens;
  if (tokenizer.Bos() < 0) return Fail(cmd, Status::Unsupported("ppl: the model has no BOS token"));
  auto plan = bench::PlanPerplexity(static_cast<int64_t>(tokens.size()), options);
  if (!plan.ok()) return Fail(cmd, plan.status());
  std::fprintf(stderr, "ppl: %s, %zu tokens (with BOS), c=%lld, %s, %d windows x %d scored tokens\n",
               (*model)->info().name.c_str(), tokens.size(), n_ctx,
               stride == 0 ? "llama-perplexity chunks" : ("stride " + std::to_string(stride)).c_str(),
               plan->n_windows, plan->scored_per_window);

  std::vector<TypeResult> results;
  for (const KvConfig& kv : types) {
    engine::ContextOptions co;
    co.n_slots = 1;
    co.slot_ctx = static_cast<int>(n_ctx);
    co.n_batch = static_cast<int>(std::min(batch, n_ctx));
    co.type_k = co.type_v = kv.rest;
    co.slot_type_k = co.slot_type_v = kv.slot;
    co.n_threads = static_cast<int>(threads);
    auto ctx = engine::Context::Create(**model, co);
    if (!ctx.ok()) return Fail(cmd, ctx.status());
    std::fprintf(stderr, "kv %s:", kv.Label().c_str());
    auto progress = [](int w, const bench::NllAccumulator& acc) {
      std::fprintf(stderr, " [%d]%.4f", w + 1, acc.Ppl());
    };
    auto r = bench::EvaluatePerplexity(**ctx, tokens, tokenizer.Bos(), options, progress);
    std::fputs("\n", stderr);
    if (!r.ok()) return Fail(cmd, r.status());
    std::printf("kv %-5s PPL = %.4f +/- %.5f  (%lld tokens scored in %d windows, %.1f s, %.0f tok/s)\n",
                kv.Label().c_str(), r->ppl, r->ppl_error, static_cast<long long>(r->n_scored),
                r->plan.n_windows, r->eval_ms / 1000, r->n_evaluated * 1000.0 / r->eval_ms);
    std::fflush(stdout);
    results.push_back({kv, *r});
  }

  const TypeResult* f16 = nullptr;
  for (const auto& t : results) {
    if (!t.kv.hybrid() && t.kv.rest == engine::KvType::kF16) f16 = &t;
  }
  std::vector<std::vector<std::string>> rows;
  nlohmann::json jr = nlohmann::json::array();
  for (const auto& t : results) {
    const double delta = f16 ? 100.0 * (t.r.ppl / f16->r.ppl - 1.0) : 0.0;
    const double top1 = f16 ? bench::Top1Agreement(t.r.top1, f16->r.top1) : 0.0;
    rows.push_back({t.kv.Label(), bench::Format("%.4f", t.r.ppl), bench::Format("%.4f", t.r.ppl_error),
                    f16 ? bench::Format("%+.3f%%", delta) : "-", f16 ? bench::Format("%.2f%%", 100 * top1) : "-",
                    std::to_string(t.r.n_scored),
                    bench::Format("%.1f", t.r.eval_ms / 1000),
                    bench::Format("%.0f", t.r.n_evaluated * 1000.0 / t.r.eval_ms)});
    nlohmann::json j = {{"kv", engine::KvTypeName(t.kv.rest)}, {"slot_kv", engine::KvTypeName(t.kv.slot)},
                        {"context_round_trip", t.kv.hybrid()}, {"ppl", t.r.ppl},         {"ppl_error", t.r.ppl_error},
                        {"mean_nll", t.r.mean_nll},       {"n_scored", t.r.n_scored}, {"n_windows", t.r.plan.n_windows},
                        {"eval_s", t.r.eval_ms / 1000},   {"tokens_evaluated", t.r.n_evaluated}};
    if (f16) {
      j["delta_vs_f16_pct"] = delta;
      j["top1_agreement_vs_f16"] = top1;
    }
    jr.push_back(j);
  }
  std::printf("\n%s", bench::MarkdownTable({"KV", "PPL", "+/-", "vs f16", "top-1 = f16", "scored tokens", "seconds", "eval tok/s"},
                                           rows)
                          .c_str());

  if (auto out = flags.Get("json")) {
    nlohmann::json j = {{"benchmark", "ppl"},
                        {"model", (*model)->info().name},
                        {"model_identity", (*model)->info().identity_hash},
                        {"text", *text_path},
                        {"text_bytes", text->size()},
                        {"n_tokens", tokens.size()},
                        {"ctx", n_ctx},
                        {"stride", stride},
                        {"mode", stride == 0 ? "llama-perplexity-chunks" : "sliding"},
                        {"batch", std::min(batch, n_ctx)},
                        {"threads", threads},
                        {"flash_attn", true},
                        {"results", jr}};
    if (results.size() == 1) {  // flat fields for drivers that run one type per call
      j["kv"] = engine::KvTypeName(results[0].kv.rest);
      j["slot_kv"] = engine::KvTypeName(results[0].kv.slot);
      j["ppl"] = results[0].r.ppl;
      j["ppl_error"] = results[0].r.ppl_error;
      j["tokens_scored"] = results[0].r.n_scored;
    }
    if (Status s = WriteJson(j, *out); !s.ok()) return Fail(cmd, s);
  }
  return 0;
}

}  // namespace agentkv::cli
