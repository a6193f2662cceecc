// agentkv synth-model: write a random-weight GGUF at a real model's shapes.
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "synth/preset.h"
#include "synth/synth_model.h"
#include "synth/vocab.h"
#include "synth/weights.h"

namespace agentkv::cli {

namespace {

void PrintUsage() {
  std::fprintf(stderr,
               "usage: agentkv synth-model --preset NAME -o FILE.gguf [--type f16|q8_0|q4_0|f32]\n"
               "                           [--seed N] [--vocab-dir DIR] [--dry-run]\n"
               "       agentkv synth-model --list\n"
               "Random weights at real shapes, for speed and cache tests only (never for quality).\n"
               "  --type       weight type of matrices (default q8_0); norms stay f32\n"
               "  --seed       weight seed (default 0); same seed, same bytes\n"
               "  --dry-run    print the summary (file size included) without writing\n"
               "  --vocab-dir  llama.cpp models/ dir with ggml-vocab-*.gguf (default %s)\n"
               "presets: %s\n",
               synth::DefaultVocabDir().c_str(), synth::PresetNameList().c_str());
}

void PrintPresets() {
  for (const auto& p : synth::AllPresets()) {
    std::printf("%-18s %-10s layers=%-3u n_embd=%-5u heads=%u/%u vocab=%s%s\n", p.name, synth::ArchName(p.arch),
                p.n_layer, p.n_embd, p.n_head, p.n_head_kv, p.vocab_file, p.tiny ? "  (test variant)" : "");
  }
}

std::string HumanCount(double n) {
  char buf[32];
  if (n >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.2fB", n / 1e9);
  } else if (n >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.2fM", n / 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", n);
  }
  return buf;
}

}  // namespace

int CmdSynthModel(int argc, char** argv) {
  synth::SynthOptions options;
  std::string type_name = "q8_0";
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "synth-model: %s needs a value\n", flag);
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = nullptr;
    if (arg == "--help" || arg == "-h") {
      PrintUsage();
      return 0;
    } else if (arg == "--list") {
      list = true;
    } else if (arg == "--dry-run") {
      options.dry_run = true;
    } else if (arg == "--preset") {
      if (!(v = value("--preset"))) return 2;
      options.preset = v;
    } else if (arg == "-o" || arg == "--output") {
      if (!(v = value("-o"))) return 2;
      options.output_path = v;
    } else if (arg == "--type") {
      if (!(v = value("--type"))) return 2;
      type_name = v;
    } else if (arg == "--seed") {
      if (!(v = value("--seed"))) return 2;
      char* end = nullptr;
      errno = 0;
      options.seed = std::strtoull(v, &end, 10);
      if (errno != 0 || end == v || *end != '\0') {
        std::fprintf(stderr, "synth-model: bad --seed '%s'\n", v);
        return 2;
      }
    } else if (arg == "--vocab-dir") {
      if (!(v = value("--vocab-dir"))) return 2;
      options.vocab_dir = v;
    } else {
      std::fprintf(stderr, "synth-model: unknown argument '%s'\n", arg.c_str());
      PrintUsage();
      return 2;
    }
  }
  if (list) {
    PrintPresets();
    return 0;
  }
  if (options.preset.empty() || (options.output_path.empty() && !options.dry_run)) {
    PrintUsage();
    return 2;
  }
  if (synth::FindPreset(options.preset) == nullptr) {
    std::fprintf(stderr, "synth-model: unknown preset '%s' (known: %s)\n", options.preset.c_str(),
                 synth::PresetNameList().c_str());
    return 2;
  }
  auto type = synth::ParseWeightType(type_name);
  if (!type.ok()) {
    std::fprintf(stderr, "synth-model: %s\n", type.status().message().c_str());
    return 2;
  }
  options.weight_type = *type;
  int last_percent = -10;
  options.progress = [&last_percent](uint64_t done, uint64_t total) {
    const int percent = static_cast<int>(100.0 * done / total);
    if (total > (256u << 20) && percent >= last_percent + 10) {
      std::fprintf(stderr, "synth-model: %d%%\n", percent);
      last_percent = percent;
    }
  };

  auto summary = synth::WriteSynthModel(options);
  if (!summary.ok()) {
    std::fprintf(stderr, "%s\n", summary.status().ToString().c_str());
    return summary.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const auto& s = *summary;
  std::printf("%s: arch=%s layers=%u params=%s (%" PRId64 ") vocab=%" PRId64 " type=%s bytes=%" PRIu64
              " (%.1f MiB) -> %s\n",
              s.preset.c_str(), s.arch.c_str(), s.n_layer, HumanCount(static_cast<double>(s.n_params)).c_str(),
              s.n_params, s.n_vocab, type_name.c_str(), s.file_bytes, s.file_bytes / 1048576.0,
              options.dry_run ? "(dry run, nothing written)" : options.output_path.c_str());
  return 0;
}

}  // namespace agentkv::cli
