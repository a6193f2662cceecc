#include "engine/staging_buffer.h"

#include "ggml-backend.h"

namespace agentkv::engine {
namespace {

// The host buffer type of the first GPU device, or nullptr.
ggml_backend_buffer_type_t GpuHostBufferType() {
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    if (ggml_backend_dev_type(dev) != GGML_BACKEND_DEVICE_TYPE_GPU) continue;
    if (ggml_backend_buffer_type_t buft = ggml_backend_dev_host_buffer_type(dev)) return buft;
  }
  return nullptr;
}

}  // namespace

StagingBuffer::~StagingBuffer() { Release(); }

void StagingBuffer::Release() {
  if (pinned_buffer_ != nullptr) ggml_backend_buffer_free(pinned_buffer_);
  delete[] heap_;
  pinned_buffer_ = nullptr;
  heap_ = nullptr;
  data_ = nullptr;
  capacity_ = 0;
}

std::span<uint8_t> StagingBuffer::Get(size_t size) {
  if (size > capacity_) {
    Release();
    if (want_pinned_) {
      if (ggml_backend_buffer_type_t buft = GpuHostBufferType()) {
        pinned_buffer_ = ggml_backend_buft_alloc_buffer(buft, size);
        if (pinned_buffer_ != nullptr) data_ = static_cast<uint8_t*>(ggml_backend_buffer_get_base(pinned_buffer_));
      }
    }
    if (data_ == nullptr) {
      heap_ = new uint8_t[size];  // uninitialized on purpose: every use overwrites what it reads
      data_ = heap_;
    }
    capacity_ = size;
  }
  return {data_, size};
}

}  // namespace agentkv::engine
