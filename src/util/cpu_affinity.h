#pragma once
// The process's CPUs as its affinity mask was at start-up, and a way back to
// them for threads that inherit a narrower mask.
//
// Why: the inference thread binds itself to one CPU (engine/compute_team.h),
// and every thread it starts inherits that one CPU; its bulk copies
// (ParallelFor, engine/row_copy_pipeline.h) must run on all of them.

#include <vector>

namespace agentkv {

// The CPUs this process could run on before main() (cgroup and taskset limits
// included), ascending. Empty where the platform does not tell.
const std::vector<int>& ProcessCpus();

// Lets the calling thread run on every CPU of ProcessCpus() (no-op where
// unknown). For threads started by a thread that may be bound to one CPU.
void RunOnAnyProcessCpu();

}  // namespace agentkv
