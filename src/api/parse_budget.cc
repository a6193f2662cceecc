#include "api/parse_budget.h"

namespace agentkv::api {

std::shared_ptr<void> ParseBudget::Acquire(size_t bytes) {
  size_t used = in_use_.load(std::memory_order_relaxed);
  for (;;) {
    const bool fits = max_bytes_ == 0 || used == 0 || bytes <= kAlwaysAdmittedBytes ||
                      (bytes <= max_bytes_ && used <= max_bytes_ - bytes);
    if (!fits) return nullptr;
    if (in_use_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed)) break;
  }
  // The deleter releases; the pointee is only a token.
  return std::shared_ptr<void>(new char(0), [this, bytes](void* p) {
    delete static_cast<char*>(p);
    in_use_.fetch_sub(bytes, std::memory_order_relaxed);
  });
}

}  // namespace agentkv::api
