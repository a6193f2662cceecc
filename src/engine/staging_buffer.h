#pragma once
// StagingBuffer: the host memory a slot's KV state passes through on export
// and import (hundreds of MB for long contexts). Reused across calls: growing
// it allocates once; smaller requests reuse it without touching the pages.
//
// When the model runs on a GPU, the memory comes from the GPU backend's host
// buffer type (page-locked): the device copies of llama_state_seq_{get,set}
// then run as direct DMA instead of through the driver's pageable bounce
// buffers. Otherwise it is ordinary heap memory.
//
// Thread safety: none; owned by one Context.

#include <cstddef>
#include <cstdint>
#include <span>

struct ggml_backend_buffer;

namespace agentkv::engine {

class StagingBuffer {
 public:
  // pinned: ask the first GPU device for page-locked host memory (falls back
  // to heap memory when there is none or the allocation fails).
  explicit StagingBuffer(bool pinned) : want_pinned_(pinned) {}
  ~StagingBuffer();
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  // A span of exactly `size` bytes; contents unspecified. Invalidates spans
  // returned before when it has to grow.
  std::span<uint8_t> Get(size_t size);
  bool pinned() const { return pinned_buffer_ != nullptr; }

 private:
  void Release();

  bool want_pinned_;
  ggml_backend_buffer* pinned_buffer_ = nullptr;
  uint8_t* heap_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace agentkv::engine
