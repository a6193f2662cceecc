#include "synth/vocab.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "gguf.h"

namespace agentkv::synth {

std::string DefaultVocabDir() {
  if (const char* dir = std::getenv("AGENTKV_LLAMA_DIR"); dir != nullptr && *dir != '\0') {
    return std::string(dir) + "/models";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.cache/agentkv/llama.cpp/models";
}

Result<VocabFile> VocabFile::Open(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::NotFound("open vocab: " + path + ": no such file");
  }
  gguf_init_params params = {.no_alloc = true, .ctx = nullptr};
  gguf_context* ctx = gguf_init_from_file(path.c_str(), params);
  if (ctx == nullptr) return Status::Corruption("open vocab: " + path + ": not a readable GGUF file");
  const int64_t kid = gguf_find_key(ctx, "tokenizer.ggml.tokens");
  if (kid < 0 || gguf_get_kv_type(ctx, kid) != GGUF_TYPE_ARRAY) {
    gguf_free(ctx);
    return Status::InvalidArgument("open vocab: " + path + ": no tokenizer.ggml.tokens array");
  }
  return VocabFile(ctx, static_cast<int64_t>(gguf_get_arr_n(ctx, kid)));
}

VocabFile::VocabFile(VocabFile&& o) noexcept
    : ctx_(std::exchange(o.ctx_, nullptr)), n_tokens_(o.n_tokens_) {}

VocabFile& VocabFile::operator=(VocabFile&& o) noexcept {
  if (this != &o) {
    Reset();
    ctx_ = std::exchange(o.ctx_, nullptr);
    n_tokens_ = o.n_tokens_;
  }
  return *this;
}

VocabFile::~VocabFile() { Reset(); }

void VocabFile::Reset() {
  if (ctx_ != nullptr) gguf_free(ctx_);
  ctx_ = nullptr;
}

namespace {

void CopyScalar(const gguf_context* src, int64_t i, const char* key, gguf_context* dst) {
  switch (gguf_get_kv_type(src, i)) {
    case GGUF_TYPE_UINT8: gguf_set_val_u8(dst, key, gguf_get_val_u8(src, i)); break;
    case GGUF_TYPE_INT8: gguf_set_val_i8(dst, key, gguf_get_val_i8(src, i)); break;
    case GGUF_TYPE_UINT16: gguf_set_val_u16(dst, key, gguf_get_val_u16(src, i)); break;
    case GGUF_TYPE_INT16: gguf_set_val_i16(dst, key, gguf_get_val_i16(src, i)); break;
    case GGUF_TYPE_UINT32: gguf_set_val_u32(dst, key, gguf_get_val_u32(src, i)); break;
    case GGUF_TYPE_INT32: gguf_set_val_i32(dst, key, gguf_get_val_i32(src, i)); break;
    case GGUF_TYPE_FLOAT32: gguf_set_val_f32(dst, key, gguf_get_val_f32(src, i)); break;
    case GGUF_TYPE_UINT64: gguf_set_val_u64(dst, key, gguf_get_val_u64(src, i)); break;
    case GGUF_TYPE_INT64: gguf_set_val_i64(dst, key, gguf_get_val_i64(src, i)); break;
    case GGUF_TYPE_FLOAT64: gguf_set_val_f64(dst, key, gguf_get_val_f64(src, i)); break;
    case GGUF_TYPE_BOOL: gguf_set_val_bool(dst, key, gguf_get_val_bool(src, i)); break;
    case GGUF_TYPE_STRING: gguf_set_val_str(dst, key, gguf_get_val_str(src, i)); break;
    default: assert(false && "unexpected gguf scalar type"); break;
  }
}

void CopyArray(const gguf_context* src, int64_t i, const char* key, gguf_context* dst) {
  const size_t n = gguf_get_arr_n(src, i);
  const gguf_type type = gguf_get_arr_type(src, i);
  if (type == GGUF_TYPE_STRING) {
    std::vector<const char*> strs(n);
    for (size_t j = 0; j < n; ++j) strs[j] = gguf_get_arr_str(src, i, j);
    gguf_set_arr_str(dst, key, strs.data(), n);
  } else {
    gguf_set_arr_data(dst, key, type, gguf_get_arr_data(src, i), n);
  }
}

}  // namespace

int VocabFile::CopyTokenizerKeys(gguf_context* dst) const {
  assert(dst != nullptr);
  int copied = 0;
  for (int64_t i = 0; i < gguf_get_n_kv(ctx_); ++i) {
    const char* key = gguf_get_key(ctx_, i);
    if (std::strncmp(key, "tokenizer.", 10) != 0) continue;
    if (gguf_get_kv_type(ctx_, i) == GGUF_TYPE_ARRAY) {
      CopyArray(ctx_, i, key, dst);
    } else {
      CopyScalar(ctx_, i, key, dst);
    }
    ++copied;
  }
  return copied;
}

}  // namespace agentkv::synth
