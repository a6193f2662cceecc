#pragma once
// StagingBuffer: the host memory a slot's KV state passes through on export
// and import (hundreds of MB for long contexts). Reused across calls: growing
// it allocates once; smaller requests reuse it without touching the pages.
//
// When the model runs on a GPU, the memory is page-locked: the device copies
// of llama_state_seq_{get,set} then run as direct DMA instead of through the
// driver's pageable bounce buffers. It is faulted in and then registered with
// the driver (engine/registered_memory.h: about half the time of
// cudaMallocHost, and other threads' CUDA calls are not held up meanwhile),
// else taken from the GPU backend's host buffer type (cudaMallocHost;
// AGENTKV_HOST_REGISTER=off asks for this one). Otherwise it is ordinary heap
// memory.
//
// Page-locking a full slot's worth takes long (~0.3-0.5 s per GB on the
// device machines; issue 34 counts it in agentkv's start-up at 32K), so it
// may be reserved on a thread of its own (ReserveInBackground): beside the
// rest of the start-up, the server waiting for it before it serves
// (WaitReserved), or in the background (--staging-reserve background): the
// first Get() that needs it waits for it, while a returning agent's first
// restore reads its blocks from disk.
//
// Thread safety: none, but WaitReserved and the byte counts; owned by one
// Context. ReserveInBackground's thread touches only the memory it
// allocates, which Get() adopts after joining it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <thread>

#include "engine/registered_memory.h"

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
  // returned before when it has to grow. Waits for a background reservation
  // first, and adopts it if it is at least as large as the buffer in hand.
  std::span<uint8_t> Get(size_t size);
  // Starts allocating `size` bytes on a thread of its own (heap memory has its
  // pages faulted in there too); returns at once. `on_done(ms, bytes, kind)`,
  // if set, runs on that thread when the memory is ready; kind: "page-locked,
  // registered", "page-locked" (cudaMallocHost) or "heap, faulted in". At
  // most one at a time: a second call first waits for the first.
  using ReservedFn = std::function<void(double ms, size_t bytes, const char* kind)>;
  void ReserveInBackground(size_t size, ReservedFn on_done = nullptr);
  // When Reserve's memory is reserved, and who waits for it.
  enum class When {
    kNow,         // here, before Reserve returns
    kBeside,      // on a thread of its own; the owner calls WaitReserved before it serves
    kBackground,  // on a thread of its own; only the first Get() waits for it
  };
  // Reserves `size` bytes before any use (heap memory has its pages faulted
  // in; page-locked memory already is). Once the memory is ready, logs
  // "<name>: N MB (<kind>) in N ms <when>" (<when>: "at start", "at start,
  // beside the rest of it", "reserved in the background (--<flag>
  // background)"), on the thread that reserved it.
  void Reserve(size_t size, When when, const char* name, const char* flag);
  // Returns once the reservation begun last (if any) has its memory ready
  // (after its on_done ran); adopts nothing. Any thread.
  void WaitReserved() const;
  // Whether WaitReserved would return at once. Never waits; any thread.
  bool reserved() const { return reservation_ready_.load(std::memory_order_acquire); }
  bool pinned();  // waits for a background reservation
  // The memory this buffer holds now (in hand or reserved on its own
  // thread), by kind: page-locked for the GPU, or heap. Never waits. Any
  // thread (/metrics: agentkv_host_buffer_bytes).
  uint64_t page_locked_bytes() const { return page_locked_bytes_.load(std::memory_order_relaxed); }
  uint64_t heap_bytes() const { return heap_bytes_.load(std::memory_order_relaxed); }
  // Whether the memory is meant to be page-locked: asked for, and a GPU
  // backend has host memory to give. Never waits (an allocation that then
  // fails falls back to heap memory, which pinned() tells).
  bool pinning() const;

 private:
  struct Allocation {
    RegisteredMemory registered;
    ggml_backend_buffer* pinned_buffer = nullptr;
    uint8_t* heap = nullptr;
    uint8_t* data = nullptr;
    size_t capacity = 0;
    bool locked() const { return registered.data != nullptr || pinned_buffer != nullptr; }
    const char* kind() const {
      return registered.data != nullptr ? "page-locked, registered"
             : pinned_buffer != nullptr ? "page-locked"
                                        : "heap, faulted in";
    }
  };
  // Allocate and Free count what they hand out and give back in
  // page_locked_bytes_ / heap_bytes_.
  Allocation Allocate(size_t size);
  void Free(Allocation* a);
  void AdoptReservation();  // joins the background thread, keeps the larger buffer

  bool want_pinned_;
  Allocation held_;
  std::thread reserving_;
  Allocation reserved_;  // written by reserving_ only until it is joined
  // False from a ReserveInBackground call until its memory is ready.
  std::atomic<bool> reservation_ready_{true};
  std::atomic<uint64_t> page_locked_bytes_{0}, heap_bytes_{0};
};

}  // namespace agentkv::engine
