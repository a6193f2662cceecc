#include "synth/weights.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "synth/random.h"
#include "util/hash.h"

namespace agentkv::synth {

Result<ggml_type> ParseWeightType(std::string_view name) {
  if (name == "f32") return GGML_TYPE_F32;
  if (name == "f16") return GGML_TYPE_F16;
  if (name == "q8_0") return GGML_TYPE_Q8_0;
  if (name == "q4_0") return GGML_TYPE_Q4_0;
  return Status::InvalidArgument("weight type: '" + std::string(name) + "' (want f32, f16, q8_0 or q4_0)");
}

uint32_t FileTypeOf(ggml_type type) {
  switch (type) {
    case GGML_TYPE_F32: return 0;   // LLAMA_FTYPE_ALL_F32
    case GGML_TYPE_F16: return 1;   // LLAMA_FTYPE_MOSTLY_F16
    case GGML_TYPE_Q4_0: return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case GGML_TYPE_Q8_0: return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    default: assert(false && "unsupported weight type"); return 0;
  }
}

ggml_type StorageType(const TensorSpec& spec, ggml_type weight_type) {
  if (spec.keep_f32) return GGML_TYPE_F32;
  if (spec.ne[0] % ggml_blck_size(weight_type) != 0) return GGML_TYPE_F16;
  return weight_type;
}

namespace {

constexpr int64_t kChunkElements = int64_t{1} << 20;

void Generate(const TensorSpec& spec, Xoshiro256& rng, float std_dev, int64_t first, float* out, int64_t n) {
  switch (spec.init) {
    case TensorInit::kRandom:
      for (int64_t i = 0; i < n; ++i) out[i] = std_dev * rng.NextNormalish();
      break;
    case TensorInit::kOnes:
      std::fill(out, out + n, 1.0f);
      break;
    case TensorInit::kExplicit:
      std::memcpy(out, spec.values.data() + first, n * sizeof(float));
      break;
  }
}

}  // namespace

Status EncodeTensor(const TensorSpec& spec, ggml_type type, uint64_t seed, const ByteSink& sink) {
  const int64_t n_per_row = spec.ne[0];
  const int64_t n_rows = spec.n_elements() / n_per_row;
  const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkElements / n_per_row);
  const size_t row_bytes = ggml_row_size(type, n_per_row);
  // std 1/sqrt(fan-in) keeps each matmul's output at the input's scale.
  const float std_dev = 1.0f / std::sqrt(static_cast<float>(n_per_row));
  Xoshiro256 rng(Xxh3_64(spec.name, seed));

  std::vector<float> values(rows_per_chunk * n_per_row);
  std::vector<uint8_t> encoded(type == GGML_TYPE_F32 ? 0 : rows_per_chunk * row_bytes);
  for (int64_t row = 0; row < n_rows; row += rows_per_chunk) {
    const int64_t rows = std::min(rows_per_chunk, n_rows - row);
    const int64_t n = rows * n_per_row;
    Generate(spec, rng, std_dev, row * n_per_row, values.data(), n);
    const void* bytes = values.data();
    if (type == GGML_TYPE_F16) {
      ggml_fp32_to_fp16_row(values.data(), reinterpret_cast<ggml_fp16_t*>(encoded.data()), n);
      bytes = encoded.data();
    } else if (type != GGML_TYPE_F32) {
      ggml_quantize_chunk(type, values.data(), encoded.data(), 0, rows, n_per_row, nullptr);
      bytes = encoded.data();
    }
    AGENTKV_RETURN_IF_ERROR(sink(bytes, rows * row_bytes));
  }
  return Status::OK();
}

}  // namespace agentkv::synth
