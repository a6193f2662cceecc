#include "sched/prefix_donor.h"

namespace agentkv::sched {

DonorChoice ChooseDonor(size_t own_common_bytes, const std::optional<IdleDonor>& idle,
                        std::span<const Leader> leaders) {
  const size_t floor = own_common_bytes + kMinSharedPrefixBytes;
  DonorChoice best;
  if (idle && idle->common_bytes >= floor &&
      (idle->in_ram || static_cast<double>(idle->common_bytes) >=
                           kMinDiskDonorShare * static_cast<double>(idle->text_bytes))) {
    best.kind = DonorChoice::Kind::kIdle;
    best.common_bytes = idle->common_bytes;
  }
  const size_t idle_bytes = best.kind == DonorChoice::Kind::kIdle ? best.common_bytes : 0;
  for (size_t i = 0; i < leaders.size(); ++i) {
    const Leader& l = leaders[i];
    if (l.common_bytes < floor || l.common_bytes <= best.common_bytes) continue;
    const bool ready = l.prefill_done || l.computed_bytes >= l.common_bytes;
    if (!ready && idle_bytes > 0 && l.common_bytes < idle_bytes + kMinSharedPrefixBytes) continue;
    best.kind = ready ? DonorChoice::Kind::kLeader : DonorChoice::Kind::kWaitForLeader;
    best.leader = i;
    best.common_bytes = l.common_bytes;
  }
  return best;
}

}  // namespace agentkv::sched
