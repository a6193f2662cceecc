#pragma once
// WarmMemory: a reserve of large buffers whose pages are already mapped, for
// the KV tensors a returning agent's disk read fills. The block store owns
// one (store/agent_store.h: read_reserve) and hands it to the tensors it
// reads; each such tensor's allocator shares its ownership
// (store/kv_block.h: KvAllocator), so the reserve outlives every buffer that
// may be given back to it. No process-wide instance.
//
// Why: a read block's tensors are fresh memory, and every 4 KiB page of it
// faults on first write, inside the read (the kernel's copy out of the page
// cache). An 8B-shape agent of 2,048 tokens is 81 MB, ~20,500 faults; on the
// H200 host, with the faults taken beforehand the in-server read took 6-7 ms
// less (65-67 -> 59-60 ms median, two rounds; bench/HISTORY.md, stop 13).
//
// How: SetTargets names, per buffer size, how many buffers to hold;
// FillShare allocates and faults in the missing ones (split into shares so
// that several threads can fill at once, e.g. at start-up); Take hands out a
// held buffer of exactly the asked size; Give takes a freed buffer back while
// its size holds fewer than its target (memory freed by evicted blocks is
// reused warm), else the caller frees it. Buffers come from ::operator new
// and may be freed with ::operator delete by whoever holds them, so memory
// from Take and from operator new are interchangeable (kv_block.h's KvBytes).
// The destructor frees what is held.
//
// Contents: a taken buffer holds whatever its last user left (zeros if never
// used), like malloc's; callers write every byte before reading any.
//
// Thread safety: every method may be called from any thread.

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/mutex.h"

namespace agentkv {

class WarmMemory {
 public:
  // Buffers below this size are never held (Take returns null, Give false,
  // without taking the lock): small allocations fault little.
  static constexpr size_t kMinBytes = 16 << 10;

  WarmMemory() = default;
  ~WarmMemory();
  WarmMemory(const WarmMemory&) = delete;
  WarmMemory& operator=(const WarmMemory&) = delete;

  // Replaces the targets: `targets` lists (buffer bytes, count) pairs, sizes
  // below kMinBytes ignored. Held buffers above a new target are freed.
  void SetTargets(const std::vector<std::pair<size_t, size_t>>& targets);
  // Allocates and faults in share `share` of [0, n_shares) of what each
  // target lacks, outside the lock. Shares split the count evenly, so calls
  // for all shares (on any threads) fill every target once.
  void FillShare(size_t share, size_t n_shares);

  // A held buffer of exactly `bytes`, or null (none held, or below kMinBytes).
  void* Take(size_t bytes);
  // Holds `p` (a buffer of `bytes` from ::operator new) if its size's count
  // is below its target and returns true; false: the caller frees it.
  bool Give(void* p, size_t bytes);

  // Bytes held now (idle) and the targets' total.
  size_t HeldBytes() const;
  size_t TargetBytes() const;
  // Bytes Take has handed out since the process started (monotonic).
  uint64_t TakenBytes() const;

 private:
  struct SizeClass {
    size_t target = 0;
    size_t filling = 0;             // buffers FillShare is faulting in now
    std::vector<void*> held;
  };
  mutable Mutex mu_;
  std::unordered_map<size_t, SizeClass> classes_ GUARDED_BY(mu_);  // by buffer bytes
  size_t held_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t taken_bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace agentkv
