#include "synth/metadata.h"

#include <cassert>
#include <string>

#include "gguf.h"

namespace agentkv::synth {

namespace {

// Keys are "<arch>.<suffix>"; all integers are uint32, all reals float32.
class KeyWriter {
 public:
  KeyWriter(const ModelPreset& p, gguf_context* ctx) : prefix_(std::string(ArchName(p.arch)) + "."), ctx_(ctx) {}
  void U32(const char* suffix, uint32_t v) { gguf_set_val_u32(ctx_, Key(suffix).c_str(), v); }
  void F32(const char* suffix, float v) { gguf_set_val_f32(ctx_, Key(suffix).c_str(), v); }
  void Str(const char* suffix, const char* v) { gguf_set_val_str(ctx_, Key(suffix).c_str(), v); }

 private:
  std::string Key(const char* suffix) const { return prefix_ + suffix; }
  std::string prefix_;
  gguf_context* ctx_;
};

void Common(const ModelPreset& p, int64_t n_vocab, KeyWriter& k) {
  k.U32("vocab_size", static_cast<uint32_t>(n_vocab));
  k.U32("context_length", p.n_ctx_train);
  k.U32("embedding_length", p.n_embd);
  k.U32("block_count", p.n_layer);
  k.U32("feed_forward_length", p.n_ff);
  k.U32("attention.head_count", p.n_head);
  k.F32("attention.layer_norm_rms_epsilon", p.rms_eps);
  k.F32("rope.freq_base", p.rope_theta);
}

void Gqa(const ModelPreset& p, KeyWriter& k) {
  k.U32("attention.head_count_kv", p.n_head_kv);
  k.U32("attention.key_length", p.head_dim);
  k.U32("attention.value_length", p.head_dim);
  k.U32("rope.dimension_count", p.head_dim);
}

void Gemma3(const ModelPreset& p, KeyWriter& k) {
  const SwaShape& s = p.swa;
  k.U32("attention.sliding_window", s.sliding_window);
  // llama.cpp defaults to 6 when absent (real Gemma 3 files omit it); we
  // always write it so the layer pattern is explicit in the file.
  k.U32("attention.sliding_window_pattern", s.swa_pattern);
  k.F32("rope.freq_base_swa", s.rope_theta_local);
  if (s.rope_linear_factor > 0) {
    k.Str("rope.scaling.type", "linear");
    k.F32("rope.scaling.factor", s.rope_linear_factor);
  }
}

// MLA is stored as MQA with wide heads: K = latent + rope part, V = latent.
// key_length_mla / value_length_mla are the decompressed per-head sizes.
void Deepseek2(const ModelPreset& p, KeyWriter& k) {
  const MlaShape& m = p.mla;
  const MoeShape& e = p.moe;
  k.U32("attention.head_count_kv", 1);
  k.U32("leading_dense_block_count", e.n_dense_lead);
  k.U32("attention.q_lora_rank", m.q_lora_rank);
  k.U32("attention.kv_lora_rank", m.kv_lora_rank);
  k.U32("attention.key_length", m.kv_lora_rank + m.qk_rope_head_dim);
  k.U32("attention.value_length", m.kv_lora_rank);
  k.U32("attention.key_length_mla", m.qk_nope_head_dim + m.qk_rope_head_dim);
  k.U32("attention.value_length_mla", m.v_head_dim);
  k.U32("rope.dimension_count", m.qk_rope_head_dim);
  k.U32("expert_feed_forward_length", e.n_ff_expert);
  k.U32("expert_count", e.n_expert);
  k.U32("expert_used_count", e.n_expert_used);
  k.U32("expert_shared_count", e.n_expert_shared);
  k.F32("expert_weights_scale", e.weights_scale);
  const YarnRopeScaling& y = p.yarn;
  if (y.factor > 0) {
    k.Str("rope.scaling.type", "yarn");
    k.F32("rope.scaling.factor", y.factor);
    k.U32("rope.scaling.original_context_length", y.original_ctx);
    k.F32("rope.scaling.yarn_beta_fast", y.beta_fast);
    k.F32("rope.scaling.yarn_beta_slow", y.beta_slow);
    // The converter's legacy 0.1 factor; llama.cpp divides it back out.
    k.F32("rope.scaling.yarn_log_multiplier", 0.1f * y.mscale_all_dim);
  }
}

}  // namespace

void SetArchMetadata(const ModelPreset& p, int64_t n_vocab, gguf_context* ctx) {
  assert(ctx != nullptr && n_vocab > 0);
  KeyWriter k(p, ctx);
  Common(p, n_vocab, k);
  switch (p.arch) {
    case SynthArch::kLlama:
      Gqa(p, k);
      break;
    case SynthArch::kGemma3:
      Gqa(p, k);
      Gemma3(p, k);
      break;
    case SynthArch::kDeepseek2:
      Deepseek2(p, k);
      break;
  }
}

}  // namespace agentkv::synth
