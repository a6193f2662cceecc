#pragma once
// Model presets for synthetic GGUF files: the hyperparameters of real models
// (from their public HF configs) plus tiny test variants of the same
// architectures. A preset fixes every shape except the vocabulary size, which
// comes from the tokenizer file the preset names (see vocab.h).
//
// Presets are immutable static data; all functions here are thread-safe.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agentkv::synth {

enum class SynthArch { kLlama, kGemma3, kDeepseek2 };

// llama.cpp's general.architecture string: "llama", "gemma3", "deepseek2".
const char* ArchName(SynthArch arch);

// Llama 3 style RoPE frequency scaling, stored as the rope_freqs tensor.
struct Llama3RopeScaling {
  float factor = 0;  // 0: none
  float low_freq_factor = 1;
  float high_freq_factor = 4;
  uint32_t original_ctx = 8192;
};

// YaRN RoPE scaling as written by llama.cpp's DeepSeek-V2 converter.
struct YarnRopeScaling {
  float factor = 0;  // 0: none
  uint32_t original_ctx = 0;
  float beta_fast = 32;
  float beta_slow = 1;
  float mscale_all_dim = 0;  // written as yarn_log_multiplier = 0.1 * this
};

// Multi-head latent attention (DeepSeek-V2). Enabled when kv_lora_rank > 0.
struct MlaShape {
  uint32_t q_lora_rank = 0;  // 0: plain attn_q (V2-Lite)
  uint32_t kv_lora_rank = 0;
  uint32_t qk_nope_head_dim = 0;
  uint32_t qk_rope_head_dim = 0;
  uint32_t v_head_dim = 0;
};

// Mixture of experts. Enabled when n_expert > 0; layers below n_dense_lead
// use a dense FFN of width ModelPreset::n_ff.
struct MoeShape {
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_expert_shared = 0;
  uint32_t n_ff_expert = 0;  // per expert (and per shared expert)
  uint32_t n_dense_lead = 0;
  float weights_scale = 1;
};

// Sliding-window attention (Gemma 3). Enabled when sliding_window > 0.
// swa_pattern N: in every N layers, the first N-1 are local, the last global.
struct SwaShape {
  uint32_t sliding_window = 0;
  uint32_t swa_pattern = 0;
  float rope_theta_local = 10000;
  float rope_linear_factor = 0;  // 0: none; global layers' linear RoPE scaling
};

struct ModelPreset {
  const char* name;        // e.g. "llama-3.2-1b"
  SynthArch arch;
  const char* vocab_file;  // file name inside the vocab dir
  bool tiny;               // a test variant, not a real model's shape
  uint32_t n_layer;
  uint32_t n_embd;
  uint32_t n_ff;           // dense FFN width
  uint32_t n_head;
  uint32_t n_head_kv;
  uint32_t head_dim;       // ignored for MLA (see MlaShape)
  uint32_t n_ctx_train;
  float rope_theta;
  float rms_eps;
  bool tied_embeddings;
  Llama3RopeScaling llama3_rope = {};
  YarnRopeScaling yarn = {};
  SwaShape swa = {};
  MlaShape mla = {};
  MoeShape moe = {};
};

// All presets, real models first, then the tiny variants.
const std::vector<ModelPreset>& AllPresets();

// The preset called `name`, or nullptr.
const ModelPreset* FindPreset(std::string_view name);

// "llama-3.2-1b, llama-3.1-8b, ..." for error messages and --help.
std::string PresetNameList();

}  // namespace agentkv::synth
