#include "engine/registered_memory.h"

#include <sys/mman.h>

#ifdef AGENTKV_CUDA
#include <cuda_runtime_api.h>
#endif

#include "util/fault_in.h"
#include "util/log.h"

namespace agentkv::engine {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

RegisteredMemory MapFaultedIn(size_t size) {
  if (size == 0) return {};
  // Whole huge pages, on a huge-page boundary: map one more and trim.
  const size_t bytes = (size + kHugePage - 1) / kHugePage * kHugePage;
  void* raw = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return {};
  auto* base = static_cast<uint8_t*>(raw);
  const uintptr_t at = reinterpret_cast<uintptr_t>(base);
  auto* aligned = reinterpret_cast<uint8_t*>((at + kHugePage - 1) / kHugePage * kHugePage);
  const size_t head = static_cast<size_t>(aligned - base);
  if (head > 0) munmap(base, head);
  if (kHugePage - head > 0) munmap(aligned + bytes, kHugePage - head);
  madvise(aligned, bytes, MADV_HUGEPAGE);  // a hint: without huge pages it is slower, not wrong
  FaultIn(aligned, bytes);
  return {aligned, bytes};
}

void Unmap(RegisteredMemory* m) {
  if (m->data != nullptr) munmap(m->data, m->map_bytes);
  *m = RegisteredMemory{};
}

#ifdef AGENTKV_CUDA

RegisteredMemory AllocateRegistered(size_t size) {
  RegisteredMemory m = MapFaultedIn(size);
  if (m.data == nullptr) return m;
  const cudaError_t err = cudaHostRegister(m.data, m.map_bytes, cudaHostRegisterPortable);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear it
    AKV_LOG_DEBUG("cudaHostRegister of %.1f MB failed (%s): falling back", m.map_bytes / 1e6, cudaGetErrorString(err));
    Unmap(&m);
  }
  return m;
}

void FreeRegistered(RegisteredMemory* m) {
  if (m->data == nullptr) return;
  (void)cudaHostUnregister(m->data);
  (void)cudaGetLastError();
  Unmap(m);
}

#else  // no CUDA: nothing to register with

RegisteredMemory AllocateRegistered(size_t) { return {}; }
void FreeRegistered(RegisteredMemory* m) { Unmap(m); }

#endif

}  // namespace agentkv::engine
