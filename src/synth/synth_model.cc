#include "synth/synth_model.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "gguf.h"
#include "synth/metadata.h"
#include "synth/preset.h"
#include "synth/tensor_plan.h"
#include "synth/vocab.h"
#include "synth/weights.h"

namespace agentkv::synth {

namespace {

struct GgufDeleter {
  void operator()(gguf_context* c) const { gguf_free(c); }
};
struct GgmlDeleter {
  void operator()(ggml_context* c) const { ggml_free(c); }
};
struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

Status IoError(const std::string& what, const std::string& path) {
  return Status::IOError("synth-model: " + what + " " + path + ": " + std::strerror(errno));
}

void SetGeneralMetadata(const ModelPreset& p, const SynthOptions& o, gguf_context* ctx) {
  gguf_set_val_str(ctx, "general.architecture", ArchName(p.arch));
  gguf_set_val_str(ctx, "general.type", "model");
  gguf_set_val_str(ctx, "general.name", (std::string("agentkv synthetic ") + p.name).c_str());
  gguf_set_val_str(ctx, "general.description",
                   "random weights at real shapes (agentkv synth-model); for speed and cache tests only");
  gguf_set_val_u32(ctx, "general.file_type", FileTypeOf(o.weight_type));
  if (ggml_is_quantized(o.weight_type)) gguf_set_val_u32(ctx, "general.quantization_version", GGML_QNT_VERSION);
  gguf_set_val_str(ctx, "agentkv.synth.preset", p.name);
  gguf_set_val_u64(ctx, "agentkv.synth.seed", o.seed);
}

// Adds tensor infos (no data) to `gguf`; their ggml headers live in `ggml`.
void AddTensorInfos(const std::vector<TensorSpec>& plan, ggml_type weight_type, ggml_context* ggml,
                    gguf_context* gguf) {
  for (const TensorSpec& spec : plan) {
    ggml_tensor* t = ggml_new_tensor(ggml, StorageType(spec, weight_type), static_cast<int>(spec.ne.size()),
                                     spec.ne.data());
    ggml_set_name(t, spec.name.c_str());
    gguf_add_tensor(gguf, t);
  }
}

// Streams header + tensor data to `f`. Layout per the GGUF spec: metadata
// padded to the alignment, then each tensor at its recorded offset, padded.
Status WriteBody(const std::vector<TensorSpec>& plan, const SynthOptions& o, const gguf_context* gguf,
                 uint64_t total_bytes, FILE* f, const std::string& path) {
  if (!gguf_write_to_file_ptr(gguf, f, /*only_meta=*/true)) return IoError("write header", path);
  const uint64_t data_start = gguf_get_meta_size(gguf);
  const size_t alignment = gguf_get_alignment(gguf);
  uint64_t written = data_start;
  const ByteSink sink = [&](const void* data, size_t size) -> Status {
    if (std::fwrite(data, 1, size, f) != size) return IoError("write", path);
    written += size;
    return Status::OK();
  };
  static const char kZeros[64] = {};
  for (size_t i = 0; i < plan.size(); ++i) {
    const uint64_t want = data_start + gguf_get_tensor_offset(gguf, static_cast<int64_t>(i));
    if (written != want) {
      return Status::Internal("synth-model: tensor " + plan[i].name + " at byte " + std::to_string(written) +
                              ", header says " + std::to_string(want));
    }
    AGENTKV_RETURN_IF_ERROR(
        EncodeTensor(plan[i], gguf_get_tensor_type(gguf, static_cast<int64_t>(i)), o.seed, sink));
    const size_t pad = (alignment - written % alignment) % alignment;
    AGENTKV_RETURN_IF_ERROR(sink(kZeros, pad));
    if (o.progress) o.progress(written, total_bytes);
  }
  if (written != total_bytes) return Status::Internal("synth-model: size mismatch");
  return Status::OK();
}

uint64_t PlannedFileBytes(const gguf_context* gguf) {
  const int64_t n = gguf_get_n_tensors(gguf);
  const size_t alignment = gguf_get_alignment(gguf);
  uint64_t bytes = gguf_get_meta_size(gguf);
  if (n > 0) {
    const size_t last = gguf_get_tensor_size(gguf, n - 1);
    bytes += gguf_get_tensor_offset(gguf, n - 1) + (last + alignment - 1) / alignment * alignment;
  }
  return bytes;
}

}  // namespace

Result<SynthSummary> WriteSynthModel(const SynthOptions& o) {
  const ModelPreset* p = FindPreset(o.preset);
  if (p == nullptr) {
    return Status::InvalidArgument("synth-model: unknown preset '" + o.preset + "' (known: " + PresetNameList() + ")");
  }
  if (o.weight_type != GGML_TYPE_F32 && o.weight_type != GGML_TYPE_F16 && o.weight_type != GGML_TYPE_Q8_0 &&
      o.weight_type != GGML_TYPE_Q4_0) {
    return Status::InvalidArgument(std::string("synth-model: unsupported weight type ") +
                                   ggml_type_name(o.weight_type));
  }
  const std::string vocab_path = (o.vocab_dir.empty() ? DefaultVocabDir() : o.vocab_dir) + "/" + p->vocab_file;
  AGENTKV_ASSIGN_OR_RETURN(VocabFile vocab, VocabFile::Open(vocab_path));

  const std::vector<TensorSpec> plan = PlanTensors(*p, vocab.n_tokens());
  std::unique_ptr<gguf_context, GgufDeleter> gguf(gguf_init_empty());
  SetGeneralMetadata(*p, o, gguf.get());
  SetArchMetadata(*p, vocab.n_tokens(), gguf.get());
  vocab.CopyTokenizerKeys(gguf.get());

  ggml_init_params ggml_params = {.mem_size = (plan.size() + 1) * ggml_tensor_overhead(),
                                  .mem_buffer = nullptr, .no_alloc = true};
  std::unique_ptr<ggml_context, GgmlDeleter> ggml(ggml_init(ggml_params));
  AddTensorInfos(plan, o.weight_type, ggml.get(), gguf.get());

  SynthSummary summary = {.preset = p->name, .arch = ArchName(p->arch), .n_layer = p->n_layer,
                          .n_vocab = vocab.n_tokens(), .n_tensors = static_cast<int64_t>(plan.size())};
  for (const TensorSpec& spec : plan) summary.n_params += spec.n_elements();
  summary.file_bytes = PlannedFileBytes(gguf.get());
  if (o.dry_run) return summary;

  const std::string tmp_path = o.output_path + ".tmp";
  std::unique_ptr<FILE, FileCloser> f(std::fopen(tmp_path.c_str(), "wb"));
  if (!f) return IoError("open", tmp_path);
  std::vector<char> buffer(8 << 20);
  std::setvbuf(f.get(), buffer.data(), _IOFBF, buffer.size());
  Status st = WriteBody(plan, o, gguf.get(), summary.file_bytes, f.get(), tmp_path);
  if (st.ok() && (std::fflush(f.get()) != 0 || ::fsync(fileno(f.get())) != 0)) st = IoError("sync", tmp_path);
  if (std::fclose(f.release()) != 0 && st.ok()) st = IoError("close", tmp_path);
  if (st.ok() && std::rename(tmp_path.c_str(), o.output_path.c_str()) != 0) st = IoError("rename to", o.output_path);
  if (!st.ok()) {
    std::remove(tmp_path.c_str());
    return st;
  }
  return summary;
}

}  // namespace agentkv::synth
