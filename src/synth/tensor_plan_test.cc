#include "synth/tensor_plan.h"

#include <map>

#include <gtest/gtest.h>

#include "synth/preset.h"

namespace agentkv::synth {
namespace {

int64_t CountParams(const std::vector<TensorSpec>& plan, bool skip_rope_freqs) {
  int64_t n = 0;
  for (const auto& t : plan) {
    if (skip_rope_freqs && t.name == "rope_freqs.weight") continue;
    n += t.n_elements();
  }
  return n;
}

std::map<std::string, std::vector<int64_t>> Shapes(const std::vector<TensorSpec>& plan) {
  std::map<std::string, std::vector<int64_t>> m;
  for (const auto& t : plan) m[t.name] = t.ne;
  return m;
}

TEST(PresetTest, NamesAreUniqueAndFindable) {
  for (const auto& p : AllPresets()) EXPECT_EQ(FindPreset(p.name), &p);
  EXPECT_EQ(FindPreset("llama-9000"), nullptr);
  EXPECT_NE(PresetNameList().find("tiny-deepseek2"), std::string::npos);
}

// Published parameter counts (HF safetensors totals) pin the shapes.
TEST(TensorPlanTest, LlamaParamCountsMatchTheRealModels) {
  EXPECT_EQ(CountParams(PlanTensors(*FindPreset("llama-3.2-1b"), 128256), true), 1235814400);
  EXPECT_EQ(CountParams(PlanTensors(*FindPreset("llama-3.1-8b"), 128256), true), 8030261248);
}

TEST(TensorPlanTest, Gemma3HasQkAndPostNorms) {
  const auto s = Shapes(PlanTensors(*FindPreset("gemma-3-12b"), 262144));
  EXPECT_EQ(s.at("blk.47.attn_q.weight"), (std::vector<int64_t>{3840, 4096}));
  EXPECT_EQ(s.at("blk.47.attn_k.weight"), (std::vector<int64_t>{3840, 2048}));
  EXPECT_EQ(s.at("blk.0.attn_q_norm.weight"), (std::vector<int64_t>{256}));
  EXPECT_TRUE(s.count("blk.0.post_attention_norm.weight"));
  EXPECT_TRUE(s.count("blk.0.post_ffw_norm.weight"));
  EXPECT_FALSE(s.count("output.weight"));  // tied
}

TEST(TensorPlanTest, DeepseekV2LiteUsesSplitMlaAndMoe) {
  const auto plan = PlanTensors(*FindPreset("deepseek-v2-lite"), 102400);
  const auto s = Shapes(plan);
  EXPECT_EQ(s.at("blk.0.attn_q.weight"), (std::vector<int64_t>{2048, 16 * 192}));
  EXPECT_EQ(s.at("blk.0.attn_kv_a_mqa.weight"), (std::vector<int64_t>{2048, 576}));
  EXPECT_EQ(s.at("blk.0.attn_k_b.weight"), (std::vector<int64_t>{128, 512, 16}));
  EXPECT_EQ(s.at("blk.0.attn_v_b.weight"), (std::vector<int64_t>{512, 128, 16}));
  EXPECT_EQ(s.at("blk.0.attn_output.weight"), (std::vector<int64_t>{2048, 2048}));
  EXPECT_EQ(s.at("blk.0.ffn_gate.weight"), (std::vector<int64_t>{2048, 10944}));
  EXPECT_FALSE(s.count("blk.1.ffn_gate.weight"));
  EXPECT_EQ(s.at("blk.1.ffn_up_exps.weight"), (std::vector<int64_t>{2048, 1408, 64}));
  EXPECT_EQ(s.at("blk.26.ffn_down_shexp.weight"), (std::vector<int64_t>{2816, 2048}));
  EXPECT_FALSE(s.count("blk.0.attn_kv_b.weight"));
  // DeepSeek-V2-Lite: 15.7B total parameters.
  const int64_t n = CountParams(plan, false);
  EXPECT_GT(n, 15'600'000'000);
  EXPECT_LT(n, 15'800'000'000);
}

TEST(TensorPlanTest, Llama3RopeFactorsSpanOneToFactor) {
  const auto f = Llama3RopeFactors(*FindPreset("llama-3.1-8b"));
  ASSERT_EQ(f.size(), 64u);
  EXPECT_FLOAT_EQ(f.front(), 1.0f);
  EXPECT_FLOAT_EQ(f.back(), 8.0f);
}

}  // namespace
}  // namespace agentkv::synth
