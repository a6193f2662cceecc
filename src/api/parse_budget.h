#pragma once
// ParseBudget: bounds the request-body bytes being parsed at once, across
// all requests and tenants. A parsed body costs ~25x its size in JSON DOM
// (measured: a 32 MiB body peaks at ~780 MB RSS), so without a bound N
// parallel maximal bodies exhaust memory and std::bad_alloc ends the process
// for every tenant. With it, a body that does not fit is answered 503 +
// Retry-After before it is parsed.
//
// A body is admitted when the bytes already being parsed plus its own fit in
// max_bytes, or when nothing else is being parsed (a body under the body
// limit alone always fits), or when it is small (<= kAlwaysAdmittedBytes:
// ordinary requests are never refused because a big one is being parsed;
// their DOM is bounded by the number of HTTP workers).
//
// Thread safety: Acquire and ticket release from any thread (lock-free).
// Invariants: in_use() == sum of the bytes of live tickets.

#include <atomic>
#include <cstddef>
#include <memory>

namespace agentkv::api {

class ParseBudget {
 public:
  // Bodies up to this size are always admitted (still counted).
  static constexpr size_t kAlwaysAdmittedBytes = size_t{256} << 10;

  // 0: no bound.
  explicit ParseBudget(size_t max_bytes) : max_bytes_(max_bytes) {}

  // A ticket for parsing `bytes` (released when the last copy is destroyed),
  // or null when they do not fit (see above).
  // REQUIRES: the budget outlives every ticket.
  std::shared_ptr<void> Acquire(size_t bytes);

  size_t in_use() const { return in_use_.load(std::memory_order_relaxed); }
  size_t max_bytes() const { return max_bytes_; }

 private:
  const size_t max_bytes_;
  std::atomic<size_t> in_use_{0};
};

}  // namespace agentkv::api
