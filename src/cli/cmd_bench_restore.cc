// agentkv bench restore: throughput of the engine's restore and export path
// (bench/restore_bench.h) for every context size asked for.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/restore_bench.h"
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
    "usage: agentkv bench restore -m MODEL [--tokens 1024,4096,8192] [--reps 5] [--slots 1]\n"
    "                             [--kv q4_0] [--slot-kv auto|f16|q8_0|q4_0] [-t THREADS] [--gpu-layers N]\n"
    "                             [--overlap-import auto|on|off] [--json OUT|-]\n"
    "--kv: the blocks' type (at rest); --slot-kv: the slots' (auto: --kv's);\n"
    "when they differ, the write/to-blocks stages convert rows (hybrid slots).\n"
    "--overlap-import: whether \"import (as served)\" writes the rows while llama.cpp copies\n"
    "them into the KV tensors (auto: from 4 MiB of state; engine/context.h).\n"
    "Times the path a hot restore takes (blocks -> llama.cpp state -> KV tensors, on the\n"
    "GPU when the model is offloaded) and the export after a turn, stage by stage, with\n"
    "no prefill: the KV rows are a one-token probe's rows replicated to --tokens.\n"
    "GB/s = bytes of the llama.cpp state moved (the KV rows restored: sliding-window layers\n"
    "only their window) / time (10^9). median [min-max] over --reps after a warm-up.\n";

struct Stage {
  const char* name;
  double bench::RestoreRep::*field;
};

constexpr Stage kStages[] = {
    {"write state (blocks -> llama bytes)", &bench::RestoreRep::write_state_ms},
    {"set state (llama bytes -> KV)", &bench::RestoreRep::set_state_ms},
    {"import (both, as served)", &bench::RestoreRep::import_ms},
    {"get state (KV -> llama bytes)", &bench::RestoreRep::get_state_ms},
    {"state to blocks", &bench::RestoreRep::state_to_blocks_ms},
    {"export (both, as served)", &bench::RestoreRep::export_ms},
};

}  // namespace

int CmdBenchRestore(int argc, char** argv) {
  const MeasureCommand cmd("bench restore", kUsage, argc, argv);
  if (cmd.Help()) return 0;
  if (!cmd.flags().error().empty()) return cmd.UsageError(cmd.flags().error());
  const Flags& flags = cmd.flags();
  auto unknown = flags.Unknown({"m", "model", "tokens", "reps", "slots", "kv", "slot-kv", "t", "threads", "gpu-layers", "overlap-import", "json"});
  const auto model_path = flags.Get("model", "m");
  long long reps = 0, slots = 0, threads = 0, gpu_layers = 0;
  std::string err;
  if (!unknown.empty()) err = "unknown flag --" + unknown[0];
  if (err.empty() && !model_path) err = "-m is required";
  if (err.empty()) {
    (void)(flags.GetInt("reps", "", 5, &reps, &err) && flags.GetInt("slots", "", 1, &slots, &err) &&
           flags.GetInt("threads", "t", 0, &threads, &err) && flags.GetInt("gpu-layers", "", -1, &gpu_layers, &err));
  }
  std::vector<uint32_t> sizes;
  for (const std::string& item : SplitCommaList(flags.GetOr("tokens", "", "1024,4096,8192"))) {
    const long long n = std::atoll(item.c_str());
    if ((n < 1 || n > (1 << 20)) && err.empty()) err = "bad --tokens entry '" + item + "'";
    if (n >= 1 && n <= (1 << 20)) sizes.push_back(static_cast<uint32_t>(n));
  }
  auto kv = engine::ParseKvType(flags.GetOr("kv", "", "q4_0"));
  if (err.empty() && !kv.ok()) err = kv.status().message();
  auto slot_kv = engine::ParseSlotKvType(flags.GetOr("slot-kv", "", "auto"));
  if (err.empty() && !slot_kv.ok()) err = slot_kv.status().message();
  if (err.empty() && (reps < 1 || slots < 1)) err = "need --reps >= 1, --slots >= 1";
  const std::string overlap = flags.GetOr("overlap-import", "", "auto");
  if (err.empty() && overlap != "auto" && overlap != "on" && overlap != "off") {
    err = "--overlap-import takes auto, on or off";
  }
  if (!err.empty()) {
    return cmd.UsageError(err);
  }

  engine::ModelOptions mo;
  mo.n_gpu_layers = static_cast<int>(gpu_layers);
  auto model = engine::Model::Load(*model_path, mo);
  if (!model.ok()) return cmd.Fail(model.status());
  uint32_t max_tokens = 0;
  for (auto n : sizes) max_tokens = std::max(max_tokens, n);
  engine::ContextOptions co;
  co.n_slots = static_cast<int>(slots);
  co.slot_ctx = static_cast<int>(max_tokens + 256);
  co.type_k = co.type_v = *kv;
  const engine::KvType slot_type = engine::ResolveSlotKvType(*slot_kv, *kv);
  co.slot_type_k = co.slot_type_v = slot_type;
  co.n_threads = static_cast<int>(threads);
  if (overlap != "auto") co.overlap_import = overlap == "on";
  auto ctx = engine::Context::Create(**model, co);
  if (!ctx.ok()) return cmd.Fail(ctx.status());
  std::fprintf(stderr, "bench restore: %s, %s KV at rest, %s in slots, %lld slots, %lld reps, %d GPU layers\n",
               (*model)->info().name.c_str(), engine::KvTypeName(*kv), engine::KvTypeName(slot_type), slots, reps,
               (*model)->info().n_gpu_layers);

  std::vector<std::vector<std::string>> rows;
  nlohmann::json jr = nlohmann::json::array();
  for (uint32_t n : sizes) {
    auto r = bench::RunRestoreBench(**ctx, n, static_cast<int>(reps));
    if (!r.ok()) return cmd.Fail(r.status());
    nlohmann::json stages = nlohmann::json::object();
    for (const auto& st : kStages) {
      std::vector<double> ms;
      for (const auto& rep : r->reps) ms.push_back(rep.*(st.field));
      const auto s = bench::Summarize(ms);
      const double gbps = s.median > 0 ? r->state_bytes / 1e6 / s.median : 0;
      rows.push_back({std::to_string(n), bench::Format("%.1f", r->state_bytes / 1e6), st.name,
                      bench::Format("%.2f [%.2f-%.2f]", s.median, s.min, s.max), bench::Format("%.2f", gbps)});
      stages[st.name] = {{"median_ms", s.median}, {"min_ms", s.min}, {"max_ms", s.max}, {"GBps", gbps},
                         {"samples_ms", ms}};
    }
    jr.push_back({{"tokens", n}, {"kv_bytes", r->kv_bytes}, {"state_bytes", r->state_bytes}, {"stages", stages}});
  }
  // The single stages use a plain heap buffer; "import/export (as served)"
  // use the context's staging buffer, page-locked when the model is on a GPU.
  const char* staging = (*ctx)->staging_pinned() ? "page-locked (GPU host buffer)" : "heap";
  std::printf("%s", bench::MarkdownTable({"tokens", "state MB", "stage", "ms median [min-max]", "GB/s"}, rows).c_str());
  std::printf("\nstages: heap buffer; as served: the context's staging buffer (%s)\n", staging);
  if (auto out = flags.Get("json")) {
    nlohmann::json j = {{"benchmark", "restore"}, {"model", (*model)->info().name}, {"kv", engine::KvTypeName(*kv)},
                        {"slot_kv", engine::KvTypeName(slot_type)}, {"slots", slots}, {"reps", reps},
                        {"gpu_layers", (*model)->info().n_gpu_layers}, {"staging", staging},
                        {"overlap_import", overlap}, {"results", jr}};
    if (Status s = WriteJson(j, *out); !s.ok()) return cmd.Fail(s);
  }
  return 0;
}

}  // namespace agentkv::cli
