#pragma once
// Architecture hyperparameters as GGUF key/values, under the key names and
// types llama.cpp's load_hparams reads (llama-arch.cpp LLM_KV_*), mirroring
// what llama.cpp's converters write for the real models.

#include <cstdint>

#include "synth/preset.h"

struct gguf_context;

namespace agentkv::synth {

// Sets "<arch>.*" keys on `ctx` (general.* and tokenizer.* are set elsewhere).
// REQUIRES: ctx != nullptr, n_vocab > 0.
void SetArchMetadata(const ModelPreset& preset, int64_t n_vocab, gguf_context* ctx);

}  // namespace agentkv::synth
