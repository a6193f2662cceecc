#pragma once
// AgentAdmin: the admin API's agent calls (list, inspect, delete, evict),
// over AgentTiers. The store work (a namespace's index, disk sizes,
// erasure) runs on the calling HTTP thread; the table and slot work runs on
// the inference thread, as a task (`run_on_loop`), so an admin call never
// puts file I/O on that thread.
//
// Thread safety: any thread but the inference thread (each call waits for
// its task there). Holds no state of its own.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/backend.h"
#include "sched/agent_tiers.h"

namespace agentkv::sched {

class AgentAdmin {
 public:
  // Runs `task` on the inference thread and returns once it ran.
  using RunOnLoop = std::function<void(std::function<void()> task)>;
  // Inference thread: clears `agent`'s slot (REQUIRES agent.slot >= 0, not busy) and frees it.
  using LeaveSlot = std::function<void(Agent& agent)>;

  // `tiers` is not owned and must outlive this. `slot_bytes_per_token`: a
  // resident agent's RAM size per token (AgentTiers::InfoOf).
  AgentAdmin(AgentTiers& tiers, uint64_t slot_bytes_per_token, RunOnLoop run_on_loop, LeaveSlot leave_slot);

  // Every agent of `ns` (the table's, and those only on disk when the table
  // dropped some), sorted by id, with its tier and sizes.
  Result<std::vector<api::AgentInfo>> List(const std::string& ns);
  // NotFound if neither the table nor the disk has it.
  Result<api::AgentInfo> Get(const std::string& ns, const std::string& agent_id);
  // Erases the agent (its slot, RAM copies, files and remote copy), or with
  // `evict_only` moves it out of its slot and the pool to disk. NotFound if
  // it does not exist; FailedPrecondition while it has a request in flight;
  // InvalidArgument for a bad id.
  Status Delete(const std::string& ns, const std::string& agent_id, bool evict_only);

 private:
  AgentTiers& tiers_;
  const uint64_t slot_bytes_per_token_;
  const RunOnLoop run_on_loop_;
  const LeaveSlot leave_slot_;
};

}  // namespace agentkv::sched
