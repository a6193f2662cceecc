#include "synth/tensor_plan.h"

#include <cassert>
#include <cmath>
#include <string>

namespace agentkv::synth {

int64_t TensorSpec::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

namespace {

class Planner {
 public:
  explicit Planner(std::vector<TensorSpec>* out) : out_(out) {}

  void Weight(const std::string& name, std::vector<int64_t> ne) {
    out_->push_back({.name = name + ".weight", .ne = std::move(ne)});
  }
  // F32 random (MoE router: llama-quantize keeps it F32 too).
  void F32Weight(const std::string& name, std::vector<int64_t> ne) {
    out_->push_back({.name = name + ".weight", .ne = std::move(ne), .keep_f32 = true});
  }
  void Norm(const std::string& name, int64_t n) {
    out_->push_back({.name = name + ".weight", .ne = {n}, .init = TensorInit::kOnes, .keep_f32 = true});
  }
  void Explicit(const std::string& name, std::vector<float> values) {
    const auto n = static_cast<int64_t>(values.size());
    out_->push_back({.name = name + ".weight", .ne = {n}, .init = TensorInit::kExplicit, .keep_f32 = true,
                     .values = std::move(values)});
  }

 private:
  std::vector<TensorSpec>* out_;
};

std::string Blk(uint32_t il, const char* suffix) { return "blk." + std::to_string(il) + "." + suffix; }

void Globals(const ModelPreset& p, int64_t n_vocab, Planner& t) {
  t.Weight("token_embd", {p.n_embd, n_vocab});
  t.Norm("output_norm", p.n_embd);
  if (!p.tied_embeddings) t.Weight("output", {p.n_embd, n_vocab});
  if (p.llama3_rope.factor > 0) t.Explicit("rope_freqs", Llama3RopeFactors(p));
}

void DenseFfn(const ModelPreset& p, uint32_t il, Planner& t) {
  t.Weight(Blk(il, "ffn_gate"), {p.n_embd, p.n_ff});
  t.Weight(Blk(il, "ffn_up"), {p.n_embd, p.n_ff});
  t.Weight(Blk(il, "ffn_down"), {p.n_ff, p.n_embd});
}

void GqaAttention(const ModelPreset& p, uint32_t il, Planner& t) {
  const int64_t q_width = int64_t{p.n_head} * p.head_dim;
  const int64_t kv_width = int64_t{p.n_head_kv} * p.head_dim;
  t.Weight(Blk(il, "attn_q"), {p.n_embd, q_width});
  t.Weight(Blk(il, "attn_k"), {p.n_embd, kv_width});
  t.Weight(Blk(il, "attn_v"), {p.n_embd, kv_width});
  t.Weight(Blk(il, "attn_output"), {q_width, p.n_embd});
}

void LlamaLayer(const ModelPreset& p, uint32_t il, Planner& t) {
  t.Norm(Blk(il, "attn_norm"), p.n_embd);
  GqaAttention(p, il, t);
  t.Norm(Blk(il, "ffn_norm"), p.n_embd);
  DenseFfn(p, il, t);
}

// Gemma 3 adds q/k norms and post-attention / post-FFN norms.
void Gemma3Layer(const ModelPreset& p, uint32_t il, Planner& t) {
  t.Norm(Blk(il, "attn_norm"), p.n_embd);
  GqaAttention(p, il, t);
  t.Norm(Blk(il, "attn_q_norm"), p.head_dim);
  t.Norm(Blk(il, "attn_k_norm"), p.head_dim);
  t.Norm(Blk(il, "post_attention_norm"), p.n_embd);
  t.Norm(Blk(il, "ffn_norm"), p.n_embd);
  DenseFfn(p, il, t);
  t.Norm(Blk(il, "post_ffw_norm"), p.n_embd);
}

// DeepSeek-V2 with MLA in the split form current converters write
// (attn_k_b / attn_v_b, not the legacy attn_kv_b): key_length_mla and
// value_length_mla in the metadata make llama.cpp load this form and use its
// K-only latent cache (rows of kv_lora_rank + qk_rope_head_dim).
void Deepseek2Layer(const ModelPreset& p, uint32_t il, Planner& t) {
  const MlaShape& m = p.mla;
  const int64_t k_head = int64_t{m.qk_nope_head_dim} + m.qk_rope_head_dim;
  t.Norm(Blk(il, "attn_norm"), p.n_embd);
  if (m.q_lora_rank > 0) {
    t.Norm(Blk(il, "attn_q_a_norm"), m.q_lora_rank);
    t.Weight(Blk(il, "attn_q_a"), {p.n_embd, m.q_lora_rank});
    t.Weight(Blk(il, "attn_q_b"), {m.q_lora_rank, p.n_head * k_head});
  } else {
    t.Weight(Blk(il, "attn_q"), {p.n_embd, p.n_head * k_head});
  }
  t.Norm(Blk(il, "attn_kv_a_norm"), m.kv_lora_rank);
  t.Weight(Blk(il, "attn_kv_a_mqa"), {p.n_embd, int64_t{m.kv_lora_rank} + m.qk_rope_head_dim});
  t.Weight(Blk(il, "attn_k_b"), {m.qk_nope_head_dim, m.kv_lora_rank, p.n_head});
  t.Weight(Blk(il, "attn_v_b"), {m.kv_lora_rank, m.v_head_dim, p.n_head});
  t.Weight(Blk(il, "attn_output"), {int64_t{p.n_head} * m.v_head_dim, p.n_embd});
  t.Norm(Blk(il, "ffn_norm"), p.n_embd);
  if (il < p.moe.n_dense_lead) {
    DenseFfn(p, il, t);
    return;
  }
  const MoeShape& e = p.moe;
  const int64_t n_ff_shared = int64_t{e.n_ff_expert} * e.n_expert_shared;
  t.F32Weight(Blk(il, "ffn_gate_inp"), {p.n_embd, e.n_expert});
  t.Weight(Blk(il, "ffn_gate_exps"), {p.n_embd, e.n_ff_expert, e.n_expert});
  t.Weight(Blk(il, "ffn_up_exps"), {p.n_embd, e.n_ff_expert, e.n_expert});
  t.Weight(Blk(il, "ffn_down_exps"), {e.n_ff_expert, p.n_embd, e.n_expert});
  t.Weight(Blk(il, "ffn_gate_shexp"), {p.n_embd, n_ff_shared});
  t.Weight(Blk(il, "ffn_up_shexp"), {p.n_embd, n_ff_shared});
  t.Weight(Blk(il, "ffn_down_shexp"), {n_ff_shared, p.n_embd});
}

}  // namespace

std::vector<float> Llama3RopeFactors(const ModelPreset& p) {
  const Llama3RopeScaling& s = p.llama3_rope;
  const int dim = static_cast<int>(p.head_dim);
  const double low_freq_wavelen = s.original_ctx / s.low_freq_factor;
  const double high_freq_wavelen = s.original_ctx / s.high_freq_factor;
  std::vector<float> factors;
  for (int i = 0; i < dim; i += 2) {
    // float32 like the converter's torch.arange(..., dtype=float32) / dim.
    const float freq = 1.0f / std::pow(p.rope_theta, static_cast<float>(i) / static_cast<float>(dim));
    const double wavelen = 2 * M_PI / freq;
    double f;
    if (wavelen < high_freq_wavelen) {
      f = 1;
    } else if (wavelen > low_freq_wavelen) {
      f = s.factor;
    } else {
      const double smooth = (s.original_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = 1 / ((1 - smooth) / s.factor + smooth);
    }
    factors.push_back(static_cast<float>(f));
  }
  return factors;
}

std::vector<TensorSpec> PlanTensors(const ModelPreset& p, int64_t n_vocab) {
  assert(n_vocab > 0);
  std::vector<TensorSpec> out;
  Planner t(&out);
  Globals(p, n_vocab, t);
  for (uint32_t il = 0; il < p.n_layer; ++il) {
    switch (p.arch) {
      case SynthArch::kLlama: LlamaLayer(p, il, t); break;
      case SynthArch::kGemma3: Gemma3Layer(p, il, t); break;
      case SynthArch::kDeepseek2: Deepseek2Layer(p, il, t); break;
    }
  }
  return out;
}

}  // namespace agentkv::synth
