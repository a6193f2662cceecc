#pragma once
// TenantLimiter: caps the generation requests one namespace (tenant) has in
// flight — queued in the scheduler or generating — so that one tenant cannot
// fill the scheduler's global queue (429 for everyone) on its own.
//
// A request holds a ticket from before Submit until its response ends (the
// JSON is sent, or the SSE stream is closed or dropped); a tenant at its cap
// is answered 429 + Retry-After before any work.
//
// Thread safety: Acquire and ticket release from any thread.
// Invariants (under mu_): in_flight_[ns] == live tickets of ns; no zero entries.

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "util/mutex.h"

namespace agentkv::api {

class TenantLimiter {
 public:
  // 0: no cap.
  explicit TenantLimiter(size_t max_per_tenant) : max_per_tenant_(max_per_tenant) {}

  // A ticket (released when the last copy is destroyed), or null when
  // `namespace_id` already has max_per_tenant requests in flight.
  // REQUIRES: the limiter outlives every ticket.
  std::shared_ptr<void> Acquire(const std::string& namespace_id);

  size_t in_flight(const std::string& namespace_id) const;
  size_t max_per_tenant() const { return max_per_tenant_; }

 private:
  void Release(const std::string& namespace_id);

  const size_t max_per_tenant_;
  mutable Mutex mu_;
  std::map<std::string, size_t> in_flight_ GUARDED_BY(mu_);
};

}  // namespace agentkv::api

