#pragma once
// Writes a GGUF file with seeded random weights at a preset's exact shapes,
// with a real tokenizer, loadable by the pinned llama.cpp. Random weights are
// for speed and cache-handling tests only; never report quality from them.
//
// The file is streamed: the GGUF header is written first, then each tensor is
// generated and encoded a chunk at a time, so memory stays small (tens of
// MiB) whatever the model size. Output is written to "<path>.tmp", synced and
// renamed over <path>, so <path> is either absent/old or complete.
//
// Thread safety: WriteSynthModel may run concurrently for different paths.

#include <cstdint>
#include <functional>
#include <string>

#include "ggml.h"
#include "util/status.h"

namespace agentkv::synth {

struct SynthOptions {
  std::string preset;       // a name from AllPresets()
  std::string output_path;
  ggml_type weight_type = GGML_TYPE_Q8_0;  // F32, F16, Q8_0 or Q4_0
  uint64_t seed = 0;
  std::string vocab_dir;    // empty: DefaultVocabDir()
  bool dry_run = false;     // fill the summary (sizes included), write nothing
  // Called after each tensor with bytes written so far and the total.
  std::function<void(uint64_t done_bytes, uint64_t total_bytes)> progress;
};

struct SynthSummary {
  std::string preset;
  std::string arch;         // general.architecture
  uint32_t n_layer = 0;
  int64_t n_vocab = 0;
  int64_t n_tensors = 0;
  int64_t n_params = 0;     // total elements over all tensors
  uint64_t file_bytes = 0;
};

// Errors: InvalidArgument (unknown preset or weight type), NotFound /
// Corruption (vocab file), IOError (cannot write; no partial file is left at
// output_path).
Result<SynthSummary> WriteSynthModel(const SynthOptions& options);

}  // namespace agentkv::synth
