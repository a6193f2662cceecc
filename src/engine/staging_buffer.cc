#include "engine/staging_buffer.h"

#include <chrono>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "ggml-backend.h"
#include "util/fault_in.h"
#include "util/log.h"

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

// Page-locked memory is registered (RegisteredMemory) unless
// AGENTKV_HOST_REGISTER=off (read once): then cudaMallocHost, as before stop 32.
bool RegisterHostMemory() {
  static const bool on = [] {
    const char* v = std::getenv("AGENTKV_HOST_REGISTER");
    return v == nullptr || std::string_view(v) != "off";
  }();
  return on;
}

}  // namespace

StagingBuffer::~StagingBuffer() {
  AdoptReservation();
  Free(&held_);
}

StagingBuffer::Allocation StagingBuffer::Allocate(size_t size) {
  Allocation a;
  if (want_pinned_) {
    if (ggml_backend_buffer_type_t buft = GpuHostBufferType()) {
      if (RegisterHostMemory()) {
        a.registered = AllocateRegistered(size);
        a.data = a.registered.data;
      }
      if (a.data == nullptr) {
        a.pinned_buffer = ggml_backend_buft_alloc_buffer(buft, size);
        if (a.pinned_buffer != nullptr) a.data = static_cast<uint8_t*>(ggml_backend_buffer_get_base(a.pinned_buffer));
      }
    }
  }
  if (a.data == nullptr) {
    a.heap = new uint8_t[size];  // uninitialized on purpose: every use overwrites what it reads
    a.data = a.heap;
  }
  a.capacity = size;
  (a.locked() ? page_locked_bytes_ : heap_bytes_).fetch_add(size, std::memory_order_relaxed);
  return a;
}

void StagingBuffer::Free(Allocation* a) {
  (a->locked() ? page_locked_bytes_ : heap_bytes_).fetch_sub(a->capacity, std::memory_order_relaxed);
  FreeRegistered(&a->registered);
  if (a->pinned_buffer != nullptr) ggml_backend_buffer_free(a->pinned_buffer);
  delete[] a->heap;
  *a = Allocation{};
}

void StagingBuffer::AdoptReservation() {
  if (!reserving_.joinable()) return;
  reserving_.join();
  if (reserved_.capacity >= held_.capacity) std::swap(held_, reserved_);
  Free(&reserved_);
}

std::span<uint8_t> StagingBuffer::Get(size_t size) {
  AdoptReservation();
  if (size > held_.capacity) {
    Free(&held_);
    held_ = Allocate(size);
  }
  return {held_.data, size};
}

void StagingBuffer::ReserveInBackground(size_t size, ReservedFn on_done) {
  AdoptReservation();
  reservation_ready_.store(false, std::memory_order_release);
  reserving_ = std::thread([this, size, on_done = std::move(on_done)] {
    const auto start = std::chrono::steady_clock::now();
    Allocation a = Allocate(size);
    // Fault the pages in now (page-locked memory already is), not in a request.
    if (a.heap != nullptr) FaultIn(a.heap, size);
    reserved_ = a;
    if (on_done != nullptr) {
      on_done(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(), size,
              a.kind());
    }
    reservation_ready_.store(true, std::memory_order_release);
    reservation_ready_.notify_all();
  });
}

void StagingBuffer::WaitReserved() const { reservation_ready_.wait(false, std::memory_order_acquire); }

void StagingBuffer::Reserve(size_t size, When when, const char* name, const char* flag) {
  auto ready = [when, name, flag](double ms, size_t bytes, const char* kind) {
    AKV_LOG_INFO("%s: %.1f MB (%s) in %.0f ms %s%s%s", name, bytes / 1e6, kind, ms,
                 when == When::kNow      ? "at start"
                 : when == When::kBeside ? "at start, beside the rest of it"
                                         : "reserved in the background (--",
                 when == When::kBackground ? flag : "", when == When::kBackground ? " background)" : "");
  };
  if (when != When::kNow) return ReserveInBackground(size, std::move(ready));
  const auto start = std::chrono::steady_clock::now();
  std::span<uint8_t> buf = Get(size);
  // Fault the pages in now (page-locked memory already is), not in a request.
  if (held_.heap != nullptr) FaultIn(buf.data(), buf.size());
  ready(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(), size,
        held_.kind());
}

bool StagingBuffer::pinning() const { return want_pinned_ && GpuHostBufferType() != nullptr; }

bool StagingBuffer::pinned() {
  AdoptReservation();
  return held_.locked();
}

}  // namespace agentkv::engine
