#pragma once
// Model: a loaded GGUF file (weights + vocabulary), shared by contexts.
//
// Load() validates the file before llama.cpp sees it (exists, GGUF magic,
// readable metadata, supported architecture) so that bad input becomes a
// Status with a clear message, never an abort.
// Thread safety: immutable after Load(); its methods are safe from any thread.

#include <cstdint>
#include <memory>
#include <string>

#include "engine/weights_digest.h"
#include "util/status.h"

struct llama_model;
struct llama_vocab;

namespace agentkv::engine {

struct ModelOptions {
  // Layers to offload to a GPU. -1: all of them when a GPU backend is built
  // and finds a device (llama_supports_gpu_offload), none otherwise.
  int n_gpu_layers = -1;
  // Where the digest of the tensor data is cached ("" = read all weights on
  // every load); see weights_digest.h.
  WeightsDigestOptions weights_digest;
  // Load only the vocabulary (tokenizer tests on llama.cpp's vocab-only
  // GGUF files): no weights, so no Context can be made from the model.
  bool vocab_only = false;
};

struct ModelInfo {
  std::string path;
  std::string name;          // file name without directory
  std::string architecture;  // general.architecture
  uint64_t file_bytes = 0;
  uint64_t tensor_data_offset = 0;  // where the tensor data section begins in the file
  uint64_t n_params = 0;
  int32_t n_layer = 0;
  int32_t n_embd = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  // Values per head in K and V: "<arch>.attention.key_length" /
  // "value_length" when the GGUF has them, else n_embd / n_head.
  int32_t n_embd_head_k = 0;
  int32_t n_embd_head_v = 0;
  int32_t n_ctx_train = 0;
  int32_t n_swa = 0;         // sliding window (0 = none)
  int32_t n_vocab = 0;
  int32_t n_gpu_layers = 0;  // layers llama.cpp was asked to offload (0: CPU only)
  bool has_chat_template = false;
  // sha256 over the GGUF metadata (all keys and values, tokenizer arrays
  // included), the tensor table and the XXH3-64 of all tensor data bytes;
  // see docs/engine.md "Model fingerprint".
  std::string identity_hash;
  uint64_t weights_bytes_hashed = 0;  // read by Load for the digest (0: it came from the cache)
};

class Model {
 public:
  static Result<std::unique_ptr<Model>> Load(const std::string& path, const ModelOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelInfo& info() const { return info_; }
  llama_model* raw() const { return model_; }
  const llama_vocab* vocab() const;

 private:
  Model() = default;
  llama_model* model_ = nullptr;
  ModelInfo info_;
};

// Initializes llama.cpp's backends once per process and routes its log into
// ours (warnings and errors only unless AGENTKV_LOG=debug). Idempotent.
void InitLlamaBackend();

}  // namespace agentkv::engine
