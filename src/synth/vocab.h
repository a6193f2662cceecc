#pragma once
// Tokenizers for synthetic models, borrowed from llama.cpp's
// models/ggml-vocab-*.gguf files (metadata-only GGUFs). The synthetic model's
// vocabulary size is the vocab file's token count.
//
// Thread safety: a VocabFile is immutable after Open; const methods may be
// called from any thread.

#include <cstdint>
#include <memory>
#include <string>

#include "util/status.h"

struct gguf_context;

namespace agentkv::synth {

// The vocab directory used when none is given: $AGENTKV_LLAMA_DIR/models if
// that variable is set, else $HOME/.cache/agentkv/llama.cpp/models.
std::string DefaultVocabDir();

class VocabFile {
 public:
  // Reads the GGUF metadata at `path`. Errors: NotFound (no such file),
  // Corruption (not a GGUF), InvalidArgument (no tokenizer.ggml.tokens).
  static Result<VocabFile> Open(const std::string& path);

  VocabFile(VocabFile&&) noexcept;
  VocabFile& operator=(VocabFile&&) noexcept;
  ~VocabFile();

  int64_t n_tokens() const { return n_tokens_; }

  // Copies every "tokenizer.*" key (scalars and arrays) to `dst`; returns
  // how many were copied. REQUIRES: dst != nullptr.
  int CopyTokenizerKeys(gguf_context* dst) const;

 private:
  VocabFile(gguf_context* ctx, int64_t n_tokens) : ctx_(ctx), n_tokens_(n_tokens) {}
  void Reset();

  gguf_context* ctx_ = nullptr;  // owned
  int64_t n_tokens_ = 0;
};

}  // namespace agentkv::synth
