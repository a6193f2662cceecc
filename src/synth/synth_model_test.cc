#include "synth/synth_model.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf.h"
#include "synth/preset.h"
#include "synth/tensor_plan.h"

namespace agentkv::synth {
namespace {

namespace fs = std::filesystem;

class SynthModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("agentkv_synth_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  SynthOptions Options(const std::string& preset, const std::string& file, ggml_type type = GGML_TYPE_Q8_0) {
    SynthOptions o;
    o.preset = preset;
    o.output_path = (dir_ / file).string();
    o.weight_type = type;
    o.seed = 1;
    o.vocab_dir = AGENTKV_SYNTH_VOCAB_DIR;
    return o;
  }

  fs::path dir_;
};

struct GgufReader {
  explicit GgufReader(const std::string& path, ggml_context** data_ctx = nullptr) {
    gguf_init_params params = {.no_alloc = data_ctx == nullptr, .ctx = data_ctx};
    ctx = gguf_init_from_file(path.c_str(), params);
  }
  ~GgufReader() {
    if (ctx) gguf_free(ctx);
  }
  uint32_t U32(const std::string& key) const {
    const int64_t id = gguf_find_key(ctx, key.c_str());
    EXPECT_GE(id, 0) << key;
    return id < 0 ? 0 : gguf_get_val_u32(ctx, id);
  }
  std::string Str(const std::string& key) const {
    const int64_t id = gguf_find_key(ctx, key.c_str());
    EXPECT_GE(id, 0) << key;
    return id < 0 ? "" : gguf_get_val_str(ctx, id);
  }
  std::vector<int64_t> Shape(const std::string& name) const {
    const int64_t id = gguf_find_tensor(ctx, name.c_str());
    if (id < 0) return {};
    const int64_t* ne = gguf_get_tensor_ne(ctx, id);
    std::vector<int64_t> out(ne, ne + GGML_MAX_DIMS);
    while (out.size() > 1 && out.back() == 1) out.pop_back();
    return out;
  }
  gguf_context* ctx = nullptr;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(SynthModelTest, EveryTinyPresetReadsBackWithItsPlan) {
  for (const char* name : {"tiny-llama", "tiny-gemma3", "tiny-deepseek2"}) {
    SCOPED_TRACE(name);
    const SynthOptions o = Options(name, std::string(name) + ".gguf");
    auto summary = WriteSynthModel(o);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    EXPECT_EQ(fs::file_size(o.output_path), summary->file_bytes);
    EXPECT_FALSE(fs::exists(o.output_path + ".tmp"));
    EXPECT_LT(summary->file_bytes, 40u << 20);

    GgufReader r(o.output_path);
    ASSERT_NE(r.ctx, nullptr);
    const ModelPreset& p = *FindPreset(name);
    const std::string arch = ArchName(p.arch);
    EXPECT_EQ(r.Str("general.architecture"), arch);
    EXPECT_EQ(r.U32(arch + ".block_count"), p.n_layer);
    EXPECT_EQ(r.U32(arch + ".embedding_length"), p.n_embd);
    const int64_t tokens = gguf_get_arr_n(r.ctx, gguf_find_key(r.ctx, "tokenizer.ggml.tokens"));
    EXPECT_EQ(tokens, summary->n_vocab);
    EXPECT_EQ(r.U32(arch + ".vocab_size"), tokens);
    EXPECT_GE(gguf_find_key(r.ctx, "tokenizer.ggml.model"), 0);
    EXPECT_GE(gguf_find_key(r.ctx, "tokenizer.ggml.merges"), 0);
    EXPECT_EQ(r.Shape("token_embd.weight"), (std::vector<int64_t>{p.n_embd, tokens}));

    const auto plan = PlanTensors(p, tokens);
    ASSERT_EQ(gguf_get_n_tensors(r.ctx), static_cast<int64_t>(plan.size()));
    for (const auto& t : plan) EXPECT_EQ(r.Shape(t.name), t.ne) << t.name;
    // Norms stay F32; matrices take the requested type.
    EXPECT_EQ(gguf_get_tensor_type(r.ctx, gguf_find_tensor(r.ctx, "output_norm.weight")), GGML_TYPE_F32);
    EXPECT_EQ(gguf_get_tensor_type(r.ctx, gguf_find_tensor(r.ctx, "blk.0.attn_output.weight")), GGML_TYPE_Q8_0);
  }
}

TEST_F(SynthModelTest, Gemma3TinyHasLocalAndGlobalLayers) {
  const SynthOptions o = Options("tiny-gemma3", "g.gguf");
  ASSERT_TRUE(WriteSynthModel(o).ok());
  GgufReader r(o.output_path);
  EXPECT_EQ(r.U32("gemma3.attention.sliding_window"), 128u);
  const uint32_t pattern = r.U32("gemma3.attention.sliding_window_pattern");
  EXPECT_GT(pattern, 1u);
  EXPECT_LE(pattern, 6u);  // some global layer exists
  EXPECT_LT(r.U32("gemma3.attention.head_count_kv"), r.U32("gemma3.attention.head_count"));
}

TEST_F(SynthModelTest, Deepseek2TinyKeepsMlaAndMoe) {
  const SynthOptions o = Options("tiny-deepseek2", "d.gguf");
  ASSERT_TRUE(WriteSynthModel(o).ok());
  GgufReader r(o.output_path);
  EXPECT_EQ(r.U32("deepseek2.attention.head_count_kv"), 1u);
  EXPECT_NE(r.U32("deepseek2.attention.key_length"), r.U32("deepseek2.attention.value_length"));
  EXPECT_GT(r.U32("deepseek2.attention.key_length_mla"), 0u);
  EXPECT_GT(r.U32("deepseek2.attention.value_length_mla"), 0u);
  EXPECT_GT(r.U32("deepseek2.expert_count"), r.U32("deepseek2.expert_used_count"));
  EXPECT_FALSE(r.Shape("blk.1.ffn_gate_exps.weight").empty());
  EXPECT_FALSE(r.Shape("blk.0.attn_k_b.weight").empty());
}

TEST_F(SynthModelTest, SameSeedSameBytesOtherSeedOtherBytes) {
  SynthOptions a = Options("tiny-deepseek2", "a.gguf", GGML_TYPE_Q4_0);
  SynthOptions b = Options("tiny-deepseek2", "b.gguf", GGML_TYPE_Q4_0);
  SynthOptions c = Options("tiny-deepseek2", "c.gguf", GGML_TYPE_Q4_0);
  c.seed = 2;
  ASSERT_TRUE(WriteSynthModel(a).ok());
  ASSERT_TRUE(WriteSynthModel(b).ok());
  ASSERT_TRUE(WriteSynthModel(c).ok());
  const std::string bytes_a = ReadAll(a.output_path);
  EXPECT_EQ(bytes_a, ReadAll(b.output_path));
  const std::string bytes_c = ReadAll(c.output_path);
  ASSERT_EQ(bytes_a.size(), bytes_c.size());  // only the seed value and weights differ
  EXPECT_NE(bytes_a, bytes_c);
}

TEST_F(SynthModelTest, F32ValuesHaveTheDocumentedScale) {
  const SynthOptions o = Options("tiny-llama", "f.gguf", GGML_TYPE_F32);
  ASSERT_TRUE(WriteSynthModel(o).ok());
  ggml_context* data = nullptr;
  GgufReader r(o.output_path, &data);
  ASSERT_NE(r.ctx, nullptr);
  const ggml_tensor* norm = ggml_get_tensor(data, "blk.1.ffn_norm.weight");
  ASSERT_NE(norm, nullptr);
  for (int64_t i = 0; i < ggml_nelements(norm); ++i) ASSERT_EQ(static_cast<const float*>(norm->data)[i], 1.0f);
  const ggml_tensor* w = ggml_get_tensor(data, "blk.1.ffn_down.weight");
  ASSERT_NE(w, nullptr);
  double sum_sq = 0;
  for (int64_t i = 0; i < ggml_nelements(w); ++i) sum_sq += std::pow(static_cast<const float*>(w->data)[i], 2);
  EXPECT_NEAR(std::sqrt(sum_sq / ggml_nelements(w)), 1.0 / std::sqrt(double(w->ne[0])), 0.01);
  ggml_free(data);
}

TEST_F(SynthModelTest, AllWeightTypesWrite) {
  for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
    SCOPED_TRACE(ggml_type_name(t));
    const SynthOptions o = Options("tiny-llama", std::string("t_") + ggml_type_name(t) + ".gguf", t);
    auto s = WriteSynthModel(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    GgufReader r(o.output_path);
    ASSERT_NE(r.ctx, nullptr);
    EXPECT_EQ(gguf_get_tensor_type(r.ctx, gguf_find_tensor(r.ctx, "blk.0.attn_q.weight")), t);
  }
}

TEST_F(SynthModelTest, DryRunPredictsTheSizeAndWritesNothing) {
  SynthOptions o = Options("tiny-gemma3", "dry.gguf", GGML_TYPE_Q4_0);
  o.dry_run = true;
  auto planned = WriteSynthModel(o);
  ASSERT_TRUE(planned.ok());
  EXPECT_FALSE(fs::exists(o.output_path));
  o.dry_run = false;
  auto written = WriteSynthModel(o);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(planned->file_bytes, fs::file_size(o.output_path));
  EXPECT_EQ(planned->n_params, written->n_params);
}

TEST_F(SynthModelTest, BadInputsGiveClearErrors) {
  auto unknown = WriteSynthModel(Options("llama-9000", "x.gguf"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("tiny-llama"), std::string::npos);

  SynthOptions no_vocab = Options("tiny-llama", "y.gguf");
  no_vocab.vocab_dir = (dir_ / "nowhere").string();
  auto missing = WriteSynthModel(no_vocab);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(no_vocab.output_path));

  SynthOptions bad_dir = Options("tiny-llama", "no/such/dir/z.gguf");
  auto io = WriteSynthModel(bad_dir);
  ASSERT_FALSE(io.ok());
  EXPECT_EQ(io.status().code(), StatusCode::kIOError);
}

}  // namespace
}  // namespace agentkv::synth
