#pragma once
// Weight types and the streaming encoder that turns a TensorSpec into the
// tensor's bytes (random values generated, then converted or quantized with
// ggml) a bounded chunk at a time, so no tensor is ever held whole.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "ggml.h"
#include "synth/tensor_plan.h"
#include "util/status.h"

namespace agentkv::synth {

// "f32" | "f16" | "q8_0" | "q4_0" -> ggml type; else InvalidArgument.
Result<ggml_type> ParseWeightType(std::string_view name);

// general.file_type (llama_ftype) for a file whose matrices are `type`.
uint32_t FileTypeOf(ggml_type type);

// The type a tensor is stored as: F32 for keep_f32 tensors; F16 when the row
// length is not a multiple of the type's block size (as llama-quantize
// falls back); else `weight_type`.
ggml_type StorageType(const TensorSpec& spec, ggml_type weight_type);

// Receives consecutive pieces of a tensor's bytes.
using ByteSink = std::function<Status(const void* data, size_t size)>;

// Generates the tensor's values and passes its encoding to `sink` in chunks of
// whole rows (about 4 MiB of floats at a time). Random values depend only on
// (seed, spec.name), so a tensor's bytes do not depend on other tensors or on
// the chunk size. Returns the first non-OK status of `sink`.
// REQUIRES: type == StorageType(spec, type-of-choice).
Status EncodeTensor(const TensorSpec& spec, ggml_type type, uint64_t seed, const ByteSink& sink);

}  // namespace agentkv::synth
