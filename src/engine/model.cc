#include "engine/model.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/llama_log.h"
#include "gguf.h"
#include "llama.h"
#include "util/hash.h"
#include "util/log.h"

namespace agentkv::engine {
namespace {

// The last error llama.cpp logged on this thread (to explain a failed load).
thread_local std::string t_last_llama_error;

void LlamaLog(ggml_log_level level, const char* text, void*) {
  // Escaped and cut (engine/llama_log.h): a line may hold a request's text.
  std::string line = LlamaLogLine(text);
  if (level == GGML_LOG_LEVEL_ERROR) {
    t_last_llama_error = line;
    while (!t_last_llama_error.empty() && t_last_llama_error.back() == '\n') t_last_llama_error.pop_back();
  }
  const bool show = level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN ||
                    (LogEnabled(LogLevel::kDebug) && level != GGML_LOG_LEVEL_CONT);
  if (show) std::fputs(line.c_str(), stderr);
}

// Size of one scalar GGUF value (gguf.h keeps its own table private).
size_t GgufScalarSize(gguf_type t) {
  switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
  }
}

// Appends a GGUF key's value bytes to the identity buffer.
void AppendKv(const gguf_context* g, int64_t i, std::string* out) {
  out->append(gguf_get_key(g, i));
  out->push_back('\0');
  const gguf_type type = gguf_get_kv_type(g, i);
  out->append(std::to_string(static_cast<int>(type)));
  if (type == GGUF_TYPE_STRING) {
    out->append(gguf_get_val_str(g, i));
  } else if (type == GGUF_TYPE_ARRAY) {
    const gguf_type at = gguf_get_arr_type(g, i);
    const size_t n = gguf_get_arr_n(g, i);
    out->append(std::to_string(static_cast<int>(at)) + ":" + std::to_string(n));
    if (at == GGUF_TYPE_STRING) {
      for (size_t k = 0; k < n; ++k) {
        out->append(gguf_get_arr_str(g, i, k));
        out->push_back('\0');
      }
    } else {
      out->append(static_cast<const char*>(gguf_get_arr_data(g, i)), n * GgufScalarSize(at));
    }
  } else {
    out->append(static_cast<const char*>(gguf_get_val_data(g, i)), GgufScalarSize(type));
  }
  out->push_back('\n');
}

// Identity of a weights file: the full metadata and tensor table, and the
// digest of every tensor data byte (so no edited weight goes unnoticed).
std::string IdentityHash(const gguf_context* g, const WeightsDigest& weights) {
  std::string id = "agentkv-model-identity-v2\n";
  for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) AppendKv(g, i, &id);
  for (int64_t t = 0; t < gguf_get_n_tensors(g); ++t) {
    id += std::string(gguf_get_tensor_name(g, t)) + ":" + std::to_string(gguf_get_tensor_type(g, t)) + ":" +
          std::to_string(gguf_get_tensor_offset(g, t)) + ":" + std::to_string(gguf_get_tensor_size(g, t)) + "\n";
  }
  id += "tensor-data-xxh3=" + Hex64(weights.xxh3) + "\n";
  return Sha256Hex(id);
}

// An integer metadata value of the loaded model, if present and numeric.
std::optional<int32_t> MetaInt(const llama_model* m, const std::string& key) {
  char buf[32];
  if (llama_model_meta_val_str(m, key.c_str(), buf, sizeof buf) <= 0) return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(buf, &end, 10);
  if (end == buf || *end != '\0' || v <= 0 || v > (1 << 20)) return std::nullopt;
  return static_cast<int32_t>(v);
}

}  // namespace

void InitLlamaBackend() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(LlamaLog, nullptr);
    llama_backend_init();
  });
}

Model::~Model() {
  if (model_ != nullptr) llama_model_free(model_);
}

const llama_vocab* Model::vocab() const { return llama_model_get_vocab(model_); }

Result<std::unique_ptr<Model>> Model::Load(const std::string& path, const ModelOptions& options) {
  InitLlamaBackend();
  const std::string op = "load model " + path;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Status::NotFound(op + ": no such file");
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  {
    std::array<char, 4> magic{};
    std::ifstream f(path, std::ios::binary);
    if (!f.read(magic.data(), 4) || std::memcmp(magic.data(), "GGUF", 4) != 0) {
      return Status::InvalidArgument(op + ": not a GGUF file (bad magic)");
    }
  }
  gguf_init_params gp{/*no_alloc=*/true, /*ctx=*/nullptr};
  gguf_context* g = gguf_init_from_file(path.c_str(), gp);
  if (g == nullptr) return Status::Corruption(op + ": truncated or malformed GGUF");
  std::unique_ptr<gguf_context, decltype(&gguf_free)> g_owner(g, gguf_free);
  const int64_t arch_key = gguf_find_key(g, "general.architecture");
  if (arch_key < 0 || gguf_get_kv_type(g, arch_key) != GGUF_TYPE_STRING) {
    return Status::Corruption(op + ": missing general.architecture");
  }
  // The data section must be fully present (gguf only checks the header).
  uint64_t data_end = gguf_get_data_offset(g);
  for (int64_t t = 0; t < gguf_get_n_tensors(g); ++t) {
    data_end = std::max<uint64_t>(data_end, gguf_get_data_offset(g) + gguf_get_tensor_offset(g, t) +
                                                gguf_get_tensor_size(g, t));
  }
  if (data_end > file_bytes) {
    return Status::Corruption(op + ": truncated (tensor data ends at byte " + std::to_string(data_end) +
                              ", file has " + std::to_string(file_bytes) + ")");
  }

  auto model = std::unique_ptr<Model>(new Model());
  model->info_.path = path;
  model->info_.name = std::filesystem::path(path).filename().string();
  model->info_.architecture = gguf_get_val_str(g, arch_key);
  model->info_.file_bytes = file_bytes;
  auto weights = DigestWeights(path, gguf_get_data_offset(g), options.weights_digest);
  if (!weights.ok()) return weights.status().WithContext(op);
  model->info_.identity_hash = IdentityHash(g, *weights);
  model->info_.weights_bytes_hashed = weights->bytes_hashed;
  model->info_.tensor_data_offset = gguf_get_data_offset(g);

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = options.n_gpu_layers >= 0 ? options.n_gpu_layers : (llama_supports_gpu_offload() ? 999 : 0);
  mp.vocab_only = options.vocab_only;
  t_last_llama_error.clear();
  model->model_ = llama_model_load_from_file(path.c_str(), mp);
  if (model->model_ == nullptr) {
    const std::string why = t_last_llama_error.empty() ? "llama.cpp refused the model" : t_last_llama_error;
    return Status::Unsupported(op + ": architecture '" + model->info_.architecture + "': " + why);
  }
  llama_model* m = model->model_;
  if (options.vocab_only) {  // no hyperparameters to read or check
    model->info_.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
    return model;
  }
  if (llama_model_is_recurrent(m) || llama_model_is_hybrid(m) || llama_model_has_encoder(m) ||
      llama_model_is_diffusion(m)) {
    return Status::Unsupported(op + ": architecture '" + model->info_.architecture +
                               "' is not a decoder with an attention KV cache");
  }
  const llama_rope_type rope = llama_model_rope_type(m);
  if (rope == LLAMA_ROPE_TYPE_MROPE || rope == LLAMA_ROPE_TYPE_IMROPE || rope == LLAMA_ROPE_TYPE_VISION) {
    return Status::Unsupported(op + ": multi-dimensional RoPE models are not supported");
  }
  ModelInfo& info = model->info_;
  info.n_params = llama_model_n_params(m);
  info.n_layer = llama_model_n_layer(m);
  info.n_embd = llama_model_n_embd(m);
  info.n_head = llama_model_n_head(m);
  info.n_head_kv = llama_model_n_head_kv(m);
  info.n_ctx_train = llama_model_n_ctx_train(m);
  const int32_t head = info.n_head > 0 ? info.n_embd / info.n_head : 0;
  info.n_embd_head_k = MetaInt(m, info.architecture + ".attention.key_length").value_or(head);
  info.n_embd_head_v = MetaInt(m, info.architecture + ".attention.value_length").value_or(head);
  info.n_swa = llama_model_n_swa(m);
  info.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m));
  info.n_gpu_layers = mp.n_gpu_layers;
  info.has_chat_template = llama_model_chat_template(m, nullptr) != nullptr;
  return model;
}

}  // namespace agentkv::engine
