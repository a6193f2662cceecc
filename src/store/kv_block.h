#pragma once
// KvBlock: 256 consecutive token positions of one agent's KV cache, all
// layers, as raw (quantized) bytes exactly as the engine exported them.
//
// This is the currency between engine/ (which converts llama.cpp's
// per-sequence state into blocks and back), kv/ (RAM pool) and store/ (disk).
// Only engine/ knows what the tensors mean; everyone else treats them as
// named byte matrices.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "util/warm_memory.h"

namespace agentkv {

// std::allocator, except that
//  - value-initialization (vector(n), resize(n)) leaves the new bytes
//    uninitialized. A tensor is sized and then filled entirely, by a file read
//    or a row copy; zero-filling it first was an extra pass over fresh memory,
//    with its page faults, on the thread that sized it. (A block read sizes a
//    file's 64 tensors, 9.4 MB for the 8B shape, on the thread that read its
//    header, before any of its data reads can start.) Explicit values
//    (vector(n, v), resize(n, v), assign, insert) are written;
//  - an allocator made with a reserve (util/warm_memory.h: buffers whose pages
//    are already faulted in, so a disk read into them does not fault on every
//    page) takes buffers of a size the reserve holds from it, and gives every
//    buffer back to it when freed (the reserve keeps what its targets want,
//    the rest is deleted). The allocator shares ownership of its reserve, so
//    the reserve lives as long as any buffer that may go back to it; moves
//    and swaps carry the allocator with the buffer. A default-made allocator
//    (no reserve) is std::allocator's ::operator new / delete, and buffers of
//    either kind may be freed by either (the reserve's come from ::operator
//    new too).
template <typename T>
class KvAllocator {
 public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  KvAllocator() noexcept = default;
  explicit KvAllocator(std::shared_ptr<WarmMemory> reserve) noexcept : reserve_(std::move(reserve)) {}
  template <typename U>
  KvAllocator(const KvAllocator<U>& other) noexcept : reserve_(other.reserve()) {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    if (reserve_ != nullptr) {
      if (void* p = reserve_->Take(n * sizeof(T))) return static_cast<T*>(p);
    }
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (reserve_ == nullptr || !reserve_->Give(p, n * sizeof(T))) std::allocator<T>().deallocate(p, n);
  }
  template <typename U>
  void construct(U* p) noexcept(noexcept(::new (static_cast<void*>(p)) U)) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  const std::shared_ptr<WarmMemory>& reserve() const noexcept { return reserve_; }
  template <typename U>
  bool operator==(const KvAllocator<U>& other) const noexcept { return reserve_ == other.reserve(); }

 private:
  std::shared_ptr<WarmMemory> reserve_;
};

// A tensor's payload. Whoever sizes one (resize(n)) must write all n bytes.
using KvBytes = std::vector<uint8_t, KvAllocator<uint8_t>>;

inline constexpr uint32_t kBlockTokens = 256;

// Rows of raw KV bytes for consecutive positions [first_pos, first_pos+n_rows)
// of one layer's K or V. n_rows may be smaller than the block's n_tokens (or
// 0, then the tensor is omitted) for sliding-window layers, which keep only the
// positions inside their window.
struct KvTensor {
  std::string name;            // engine-defined, e.g. "c0.l3.k" (cache 0, layer 3, K)
  uint32_t row_bytes = 0;      // bytes per position (one row)
  uint32_t first_pos = 0;      // absolute position of row 0
  uint32_t n_rows = 0;
  KvBytes data;                // n_rows * row_bytes bytes, all written (see KvBytes)

  bool operator==(const KvTensor&) const = default;
};

// Invariants: first_pos() == index * kBlockTokens; 1 <= n_tokens <= kBlockTokens;
// every tensor's rows lie inside [first_pos(), first_pos() + n_tokens).
// A block with n_tokens < kBlockTokens is the agent's last, partial block.
struct KvBlock {
  uint32_t index = 0;      // block number within the agent's sequence
  uint32_t n_tokens = 0;   // positions covered (the last block may be partial)
  std::vector<KvTensor> tensors;

  uint32_t first_pos() const { return index * kBlockTokens; }
  bool full() const { return n_tokens == kBlockTokens; }
  // Sum of tensor payload bytes (what RAM/disk accounting counts).
  size_t payload_bytes() const {
    size_t n = 0;
    for (const auto& t : tensors) n += t.data.size();
    return n;
  }
  bool operator==(const KvBlock&) const = default;
};

}  // namespace agentkv
