// agentkv bench store: disk tier save/load throughput against plain POSIX
// I/O of the same bytes on the same disk (bench/store_bench.h).
#include <cstdio>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "bench/store_bench.h"
#include "cli/bench_json.h"
#include "cli/commands.h"
#include "cli/measure_command.h"
#include "cli/flags.h"
#include "engine/context.h"
#include "engine/model.h"

namespace agentkv::cli {
namespace {

constexpr const char* kUsage =
    "usage: agentkv bench store --cache-dir DIR [--tokens 4096] [-m MODEL] [--reps 5]\n"
    "                           [-t THREADS] [--seed 1] [--layout LAYERSxROW_BYTES] [--json OUT|-]\n"
    "                           [--read-threads N] [--read-chunk-kib N] [--read-reserve 1|0]\n"
    "Saves one agent of --tokens tokens to an AgentStore under DIR (namespace\n"
    "agentkv-bench, removed afterwards) --reps times, and loads it back with the page\n"
    "cache dropped (posix_fadvise DONTNEED; residency checked) and warm; compares with\n"
    "write+fsync and read() of one plain file of the same bytes in DIR.\n"
    "KV: with -m, a q4_0 prefill of random tokens on MODEL; without, random bytes in the\n"
    "bundled model's q4_0 layout (1152 bytes/token), or --layout's (32x576 = Llama-3.1-8B's\n"
    "q4_0 K and V rows). MB = 10^6 bytes.\n"
    "--read-threads / --read-chunk-kib: the store's reads in flight during a load (default:\n"
    "twice the cores, 8 to 32) and the size of each data read (default: about two reads per\n"
    "thread, at least 1 MiB; 0 = one read per block file, as before chunked reads).\n"
    "--read-reserve: 1 (default) fills the process's read reserve with the agent's tensor sizes\n"
    "before each cold load, untimed, as a server does at start (--read-reserve); 0 = fresh memory.\n";

struct Row {
  const char* name;
  double bench::StoreBenchRep::*field;
  const char* what;
};

constexpr Row kRows[] = {
    {"store save", &bench::StoreBenchRep::save_ms, "SaveAgent: block files + manifest, temp/fsync/rename/dir fsync"},
    {"plain write+fsync", &bench::StoreBenchRep::plain_write_ms, "one file, write() + fsync()"},
    {"store load (cold)", &bench::StoreBenchRep::load_cold_ms, "LoadBlocks after DONTNEED: read, checksum, parse"},
    {"plain read (cold)", &bench::StoreBenchRep::plain_read_ms, "one file, read() into 1 MiB buffer after DONTNEED"},
    {"plain read of block files (cold)", &bench::StoreBenchRep::plain_read_blocks_ms,
     "the store's block files, read() after DONTNEED"},
    {"store load (warm)", &bench::StoreBenchRep::load_warm_ms, "LoadBlocks again, files in page cache"},
};

}  // namespace

int CmdBenchStore(int argc, char** argv) {
  const MeasureCommand cmd("bench store", kUsage, argc, argv);
  if (cmd.Help()) return 0;
  if (!cmd.flags().error().empty()) return cmd.UsageError(cmd.flags().error());
  const Flags& flags = cmd.flags();
  auto unknown = flags.Unknown({"cache-dir", "tokens", "m", "model", "reps", "t", "threads", "seed", "json", "layout",
                                "read-threads", "read-chunk-kib", "read-reserve"});
  const auto cache_dir = flags.Get("cache-dir");
  const auto model_path = flags.Get("model", "m");
  long long n_tokens = 0, reps = 0, threads = 0, seed = 0;
  std::string err;
  if (!unknown.empty()) err = "unknown flag --" + unknown[0];
  if (err.empty() && (!cache_dir || cache_dir->empty())) err = "--cache-dir is required";
  if (err.empty()) {
    (void)(flags.GetInt("tokens", "", 4096, &n_tokens, &err) && flags.GetInt("reps", "", 5, &reps, &err) &&
           flags.GetInt("threads", "t", 0, &threads, &err) && flags.GetInt("seed", "", 1, &seed, &err));
  }
  if (err.empty() && (n_tokens < 1 || n_tokens > 1 << 20 || reps < 1)) err = "need 1 <= --tokens <= 1048576, --reps >= 1";
  long long read_threads = 0, read_chunk_kib = 0;
  if (err.empty() && flags.Get("read-threads") && flags.GetInt("read-threads", "", 0, &read_threads, &err) &&
      (read_threads < 1 || read_threads > 256)) {
    err = "need 1 <= --read-threads <= 256";
  }
  if (err.empty() && flags.Get("read-chunk-kib") && flags.GetInt("read-chunk-kib", "", 0, &read_chunk_kib, &err) &&
      (read_chunk_kib < 0 || read_chunk_kib > (1 << 20))) {
    err = "need 0 <= --read-chunk-kib <= 1048576";
  }
  long long read_reserve = 1;
  if (err.empty() && flags.GetInt("read-reserve", "", 1, &read_reserve, &err) && read_reserve != 0 &&
      read_reserve != 1) {
    err = "--read-reserve must be 1 or 0";
  }
  unsigned layout_layers = 8, layout_row_bytes = 72;
  if (auto layout = flags.Get("layout"); err.empty() && layout) {
    char tail = 0;
    if (std::sscanf(layout->c_str(), "%ux%u%c", &layout_layers, &layout_row_bytes, &tail) != 2 || layout_layers < 1 ||
        layout_layers > 1024 || layout_row_bytes < 1 || layout_row_bytes > (1u << 20)) {
      err = "--layout must be LAYERSxROW_BYTES, e.g. 32x576";
    } else if (model_path) {
      err = "--layout describes synthetic KV; it cannot be combined with -m";
    }
  }
  if (!err.empty()) {
    return cmd.UsageError(err);
  }

  bench::StoreBenchInput input;
  if (model_path) {
    auto model = engine::Model::Load(*model_path);
    if (!model.ok()) return cmd.Fail(model.status());
    engine::ContextOptions co;
    co.n_slots = 1;
    co.slot_ctx = static_cast<int>(n_tokens);
    co.n_threads = static_cast<int>(threads);
    auto ctx = engine::Context::Create(**model, co);
    if (!ctx.ok()) return cmd.Fail(ctx.status());
    auto in = bench::InputFromModel(**ctx, static_cast<int>(n_tokens), static_cast<uint64_t>(seed));
    if (!in.ok()) return cmd.Fail(in.status());
    input = std::move(in).value();
  } else {
    input = bench::SyntheticInput(static_cast<int>(n_tokens), static_cast<uint64_t>(seed), layout_layers, layout_row_bytes);
  }
  std::fprintf(stderr, "bench store: %s; cache dir %s\n", input.source.c_str(), cache_dir->c_str());

  bench::StoreBenchOptions options;
  options.cache_dir = *cache_dir;
  options.reps = static_cast<int>(reps);
  options.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  if (flags.Get("read-threads")) options.read_threads = static_cast<int>(read_threads);
  if (flags.Get("read-chunk-kib")) options.read_chunk_bytes = static_cast<size_t>(read_chunk_kib) << 10;
  options.read_reserve = read_reserve == 1;
  auto result = bench::RunStoreBench(input, options);
  if (!result.ok()) return cmd.Fail(result.status());
  const auto& r = *result;

  std::vector<double> store_resident, plain_resident;
  for (const auto& rep : r.reps) {
    store_resident.push_back(rep.store_resident_after_drop);
    plain_resident.push_back(rep.plain_resident_after_drop);
  }
  const double store_res = bench::Summarize(store_resident).max;
  const double plain_res = bench::Summarize(plain_resident).max;
  const bool dropped = r.drop_accepted && store_res < 0.05 && plain_res < 0.05;
  const std::string cache_state =
      dropped ? "page cache dropped before each cold read (posix_fadvise DONTNEED accepted; mincore: store files <= " +
                    bench::Format("%.1f%%", 100 * store_res) + ", plain file <= " +
                    bench::Format("%.1f%%", 100 * plain_res) + " resident)"
              : "page cache NOT dropped: " + (r.drop_accepted ? std::string("advice accepted") : r.drop_error) +
                    bench::Format("; still resident: store files up to %.0f%%, plain file up to %.0f%%",
                                  100 * store_res, 100 * plain_res) +
                    " -- the \"cold\" rows are page-cache reads";
  std::printf("agent: %u tokens, %u blocks, KV payload %.3f MB, block files %.3f MB, manifest %.1f KB\n",
              r.n_tokens, r.n_blocks, r.payload_bytes / 1e6, r.block_file_bytes / 1e6, r.manifest_bytes / 1e3);
  std::printf("%s\n", cache_state.c_str());
  std::printf("loads: %s read threads, data reads of %s, read reserve %s\n\n",
              options.read_threads ? std::to_string(*options.read_threads).c_str() : "default",
              !options.read_chunk_bytes        ? "the store's choice"
              : *options.read_chunk_bytes == 0 ? "whole files"
                                               : bench::Format("%zu KiB", *options.read_chunk_bytes >> 10).c_str(),
              options.read_reserve ? "on (filled before each cold load, untimed)" : "off");

  const double mb = r.block_file_bytes / 1e6;
  std::vector<std::vector<std::string>> rows;
  nlohmann::json jr = nlohmann::json::array();
  for (const auto& row : kRows) {
    std::vector<double> ms;
    for (const auto& rep : r.reps) ms.push_back(rep.*(row.field));
    const auto s = bench::Summarize(ms);
    rows.push_back({row.name, bench::Format("%.2f", s.median), bench::Format("%.2f", s.min),
                    bench::Format("%.2f", s.max), bench::Format("%.0f", s.median > 0 ? mb * 1000 / s.median : 0),
                    row.what});
    jr.push_back({{"operation", row.name},
                  {"ms", {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"n", s.n}}},
                  {"mb_per_s_median", s.median > 0 ? mb * 1000 / s.median : 0},
                  {"ms_samples", ms}});
  }
  std::printf("%s", bench::MarkdownTable({"operation", "median ms", "min ms", "max ms", "MB/s (median)", "what"}, rows)
                        .c_str());
  if (auto out = flags.Get("json")) {
    nlohmann::json j = {{"benchmark", "store"},
                        {"source", input.source},
                        {"cache_dir", *cache_dir},
                        {"n_tokens", r.n_tokens},
                        {"n_blocks", r.n_blocks},
                        {"payload_bytes", r.payload_bytes},
                        {"block_file_bytes", r.block_file_bytes},
                        {"manifest_bytes", r.manifest_bytes},
                        {"reps", reps},
                        {"read_threads", options.read_threads.value_or(0)},  // 0: the store's default
                        {"read_chunk_bytes", options.read_chunk_bytes ? nlohmann::json(*options.read_chunk_bytes)
                                                                      : nlohmann::json("auto")},
                        {"read_reserve", options.read_reserve},
                        {"page_cache_dropped", dropped},
                        {"page_cache_state", cache_state},
                        {"store_resident_after_drop", store_resident},
                        {"plain_resident_after_drop", plain_resident},
                        {"results", jr}};
    if (Status s = WriteJson(j, *out); !s.ok()) return cmd.Fail(s);
  }
  return 0;
}

}  // namespace agentkv::cli
