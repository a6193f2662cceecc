#pragma once
// RegisteredMemory: page-locked host memory made in two steps, so that the
// slow part holds up nothing else: anonymous memory with transparent huge
// pages asked for (madvise), its pages faulted in here (no GPU driver call),
// then registered with the CUDA driver (cudaHostRegister), which only pins
// pages already there.
//
// Why (issue 34's start-up; bench/tools/pin_probe.cu, bench/RESULTS.md stop
// 32, H100): cudaMallocHost of 1.37 GB (one 32K slot of the 8B shape) took
// 518-657 ms and held up every CUDA call of the process's other threads for
// all of it (up to 851 ms); faulting in the same bytes with huge pages took
// 217-282 ms holding up no CUDA call, and registering them 28-41 ms (CUDA
// calls beside it waited up to 62 ms). Two cudaMallocHost at once took as
// long as one after the other.
//
// Only in a CUDA build (AGENTKV_CUDA); elsewhere, or when any step fails,
// AllocateRegistered returns empty memory and the caller falls back (StagingBuffer:
// ggml's page-locked host buffer, then the heap).
//
// Thread safety: the functions are; a RegisteredMemory is owned by one caller.

#include <cstddef>
#include <cstdint>

namespace agentkv::engine {

struct RegisteredMemory {
  uint8_t* data = nullptr;  // null: none (not a CUDA build, or a step failed)
  size_t map_bytes = 0;     // the mapping's size (>= the size asked for)
};

// `size` bytes of page-locked memory, pages faulted in; contents zero.
RegisteredMemory AllocateRegistered(size_t size);
// Unregisters and unmaps; leaves *m empty. No-op for empty memory.
void FreeRegistered(RegisteredMemory* m);

// AllocateRegistered's first step, in every build: anonymous memory of
// `size` bytes rounded up to whole 2 MiB pages, on a 2 MiB boundary,
// transparent huge pages asked for, every page faulted in (contents zero).
// Empty if the mapping fails (or size is 0).
RegisteredMemory MapFaultedIn(size_t size);
// Unmaps memory of MapFaultedIn; leaves *m empty.
void Unmap(RegisteredMemory* m);

}  // namespace agentkv::engine
