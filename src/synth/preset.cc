// Preset values come from each model's public config.json; comments name the
// HF field where the mapping is not obvious.
#include "synth/preset.h"

namespace agentkv::synth {

const char* ArchName(SynthArch arch) {
  switch (arch) {
    case SynthArch::kLlama: return "llama";
    case SynthArch::kGemma3: return "gemma3";
    case SynthArch::kDeepseek2: return "deepseek2";
  }
  return "?";
}

namespace {

constexpr const char* kLlamaVocab = "ggml-vocab-llama-bpe.gguf";
// Gemma 3's own SentencePiece vocab is not shipped with llama.cpp; Gemma 4's
// BPE vocab has the same 262144 entries and loads under any architecture.
constexpr const char* kGemmaVocab = "ggml-vocab-gemma-4.gguf";
constexpr const char* kDeepseekVocab = "ggml-vocab-deepseek-llm.gguf";

std::vector<ModelPreset> MakePresets() {
  std::vector<ModelPreset> p;
  // meta-llama/Llama-3.2-1B: rope_scaling llama3, factor 32.
  p.push_back({.name = "llama-3.2-1b", .arch = SynthArch::kLlama, .vocab_file = kLlamaVocab, .tiny = false,
               .n_layer = 16, .n_embd = 2048, .n_ff = 8192, .n_head = 32, .n_head_kv = 8, .head_dim = 64,
               .n_ctx_train = 131072, .rope_theta = 500000, .rms_eps = 1e-5f, .tied_embeddings = true,
               .llama3_rope = {.factor = 32, .low_freq_factor = 1, .high_freq_factor = 4, .original_ctx = 8192}});
  // meta-llama/Llama-3.1-8B: rope_scaling llama3, factor 8.
  p.push_back({.name = "llama-3.1-8b", .arch = SynthArch::kLlama, .vocab_file = kLlamaVocab, .tiny = false,
               .n_layer = 32, .n_embd = 4096, .n_ff = 14336, .n_head = 32, .n_head_kv = 8, .head_dim = 128,
               .n_ctx_train = 131072, .rope_theta = 500000, .rms_eps = 1e-5f, .tied_embeddings = false,
               .llama3_rope = {.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4, .original_ctx = 8192}});
  // google/gemma-3-12b: sliding_window 1024, sliding_window_pattern 6,
  // query_pre_attn_scalar 256 (= head_dim, llama.cpp's default scale),
  // rope_scaling linear 8 on global layers, no final logit softcap.
  p.push_back({.name = "gemma-3-12b", .arch = SynthArch::kGemma3, .vocab_file = kGemmaVocab, .tiny = false,
               .n_layer = 48, .n_embd = 3840, .n_ff = 15360, .n_head = 16, .n_head_kv = 8, .head_dim = 256,
               .n_ctx_train = 131072, .rope_theta = 1e6f, .rms_eps = 1e-6f, .tied_embeddings = true,
               .swa = {.sliding_window = 1024, .swa_pattern = 6, .rope_theta_local = 1e4f, .rope_linear_factor = 8}});
  // deepseek-ai/DeepSeek-V2-Lite: q_lora_rank null, first_k_dense_replace 1,
  // routed_scaling_factor 1.0, rope_scaling yarn (factor 40, orig 4096,
  // beta_fast 32, beta_slow 1, mscale_all_dim 0.707).
  p.push_back({.name = "deepseek-v2-lite", .arch = SynthArch::kDeepseek2, .vocab_file = kDeepseekVocab, .tiny = false,
               .n_layer = 27, .n_embd = 2048, .n_ff = 10944, .n_head = 16, .n_head_kv = 16, .head_dim = 0,
               .n_ctx_train = 163840, .rope_theta = 10000, .rms_eps = 1e-6f, .tied_embeddings = false,
               .yarn = {.factor = 40, .original_ctx = 4096, .beta_fast = 32, .beta_slow = 1, .mscale_all_dim = 0.707f},
               .mla = {.q_lora_rank = 0, .kv_lora_rank = 512, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64,
                       .v_head_dim = 128},
               .moe = {.n_expert = 64, .n_expert_used = 6, .n_expert_shared = 2, .n_ff_expert = 1408,
                       .n_dense_lead = 1, .weights_scale = 1}});

  // Tiny variants: every row length a multiple of 32 (q4_0/q8_0 blocks) and
  // head dims >= 32 so q4_0 KV caches work. The vocabulary dominates their size.
  // GQA 4:2 with q width (128) != n_embd (64), as llama.cpp allows via key_length.
  p.push_back({.name = "tiny-llama", .arch = SynthArch::kLlama, .vocab_file = kLlamaVocab, .tiny = true,
               .n_layer = 4, .n_embd = 64, .n_ff = 192, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
               .n_ctx_train = 8192, .rope_theta = 500000, .rms_eps = 1e-5f, .tied_embeddings = true,
               .llama3_rope = {.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4, .original_ctx = 1024}});
  // 6 layers, pattern 3: layers 0,1,3,4 local (window 128), 2 and 5 global.
  p.push_back({.name = "tiny-gemma3", .arch = SynthArch::kGemma3, .vocab_file = kGemmaVocab, .tiny = true,
               .n_layer = 6, .n_embd = 64, .n_ff = 192, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
               .n_ctx_train = 8192, .rope_theta = 1e6f, .rms_eps = 1e-6f, .tied_embeddings = true,
               .swa = {.sliding_window = 128, .swa_pattern = 3, .rope_theta_local = 1e4f, .rope_linear_factor = 0}});
  // MLA with K width 96 (64 latent + 32 rope) != V width 64; MoE 8 experts,
  // 2 used, 2 shared; layer 0 dense.
  p.push_back({.name = "tiny-deepseek2", .arch = SynthArch::kDeepseek2, .vocab_file = kDeepseekVocab, .tiny = true,
               .n_layer = 3, .n_embd = 64, .n_ff = 192, .n_head = 4, .n_head_kv = 4, .head_dim = 0,
               .n_ctx_train = 8192, .rope_theta = 10000, .rms_eps = 1e-6f, .tied_embeddings = false,
               .mla = {.q_lora_rank = 0, .kv_lora_rank = 64, .qk_nope_head_dim = 32, .qk_rope_head_dim = 32,
                       .v_head_dim = 32},
               .moe = {.n_expert = 8, .n_expert_used = 2, .n_expert_shared = 2, .n_ff_expert = 32,
                       .n_dense_lead = 1, .weights_scale = 1}});
  return p;
}

}  // namespace

const std::vector<ModelPreset>& AllPresets() {
  static const std::vector<ModelPreset> presets = MakePresets();  // immutable after init
  return presets;
}

const ModelPreset* FindPreset(std::string_view name) {
  for (const auto& p : AllPresets()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

std::string PresetNameList() {
  std::string out;
  for (const auto& p : AllPresets()) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

}  // namespace agentkv::synth
