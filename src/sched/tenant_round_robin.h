#pragma once
// TenantRoundRobin: the order in which the scheduler tries to admit its
// waiting requests (issue 29, finding 11). FIFO let one tenant's backlog
// (up to --tenant-requests of them) take every slot that freed up before a
// later tenant's request, pushing it toward the queue timeout; this order
// gives slots to tenants in turn instead.
//
// A request's rank is the number of turns its tenant runs already plus the
// number of its tenant's requests ahead of it in the queue; lower ranks are
// tried first, ties go to the tenant admitted least recently, then to queue
// order. So one tenant's requests keep their order among themselves (the
// per-agent FIFO holds: an agent belongs to one tenant), a tenant with
// nothing running goes before one that holds slots, and while several
// tenants have a backlog they are admitted alternately.
//
// Thread safety: none (the inference thread's).
// Invariants: last_admitted_ holds only tenants that were queued or running
// at the last Order() (it stays bounded by the queue and the slots).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace agentkv::sched {

class TenantRoundRobin {
 public:
  using Counts = std::map<std::string, size_t, std::less<>>;
  // `queue`: the tenant of each waiting request, oldest first; `running`:
  // each tenant's turns in progress (absent: none). Returns the indices of
  // `queue` in the order to try them. Forgets tenants in neither.
  std::vector<size_t> Order(const std::vector<std::string_view>& queue, const Counts& running);
  // A request of `tenant` was admitted.
  void Admitted(std::string_view tenant);

 private:
  uint64_t clock_ = 0;                                          // admissions so far
  std::map<std::string, uint64_t, std::less<>> last_admitted_;  // tenant -> clock_ at its last admission
};

}  // namespace agentkv::sched
