#pragma once
// The tensor set of a preset: names, shapes and initialisation exactly as
// llama.cpp's load_tensors expects for the architecture (src/models/*.cpp in
// the pinned llama.cpp). Pure; no I/O.

#include <cstdint>
#include <string>
#include <vector>

#include "synth/preset.h"

namespace agentkv::synth {

enum class TensorInit {
  kRandom,    // normal-ish, std = 1/sqrt(ne[0]) (ne[0] is the fan-in in ggml)
  kOnes,      // norm weights
  kExplicit,  // TensorSpec::values (e.g. rope_freqs)
};

struct TensorSpec {
  std::string name;         // e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> ne;  // ggml order: ne[0] is the row length
  TensorInit init = TensorInit::kRandom;
  bool keep_f32 = false;    // never quantized: norms, router, rope factors
  std::vector<float> values = {};  // for kExplicit; size == element count

  int64_t n_elements() const;
};

// REQUIRES: n_vocab > 0. Tensors come in the order llama.cpp's converters
// write them (globals first, then by layer).
std::vector<TensorSpec> PlanTensors(const ModelPreset& preset, int64_t n_vocab);

// Llama 3 RoPE frequency factors (llama.cpp's convert_hf_to_gguf formula),
// head_dim / 2 values.
std::vector<float> Llama3RopeFactors(const ModelPreset& preset);

}  // namespace agentkv::synth
