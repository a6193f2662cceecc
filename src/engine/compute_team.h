#pragma once
// The OpenMP team that computes a thread's graphs (ggml-cpu runs every graph
// in `#pragma omp parallel` on the thread that calls llama_decode, and libgomp
// keeps that team's workers for later graphs of the same thread).

namespace agentkv::engine {

// Binds the calling thread and the n_threads - 1 workers of its team to one
// CPU each: thread i to the i-th CPU of the process's affinity mask at start
// (util/cpu_affinity.h: cgroup and taskset limits respected), as
// OMP_PROC_BIND=close with OMP_PLACES=cores would. Threads the caller starts
// later inherit its one CPU: workers of bulk copies must call
// RunOnAnyProcessCpu() (util/parallel.h and RowCopyPipeline do). Does nothing when n_threads <= 1, when the mask holds fewer CPUs than
// n_threads, when OMP_PROC_BIND is set (the user chose) or without OpenMP.
// Returns whether it bound.
//
// Why: a team created (or woken) while the other cores are busy can start
// with the caller and a worker on one CPU; with libgomp's spin-waiting both
// then spin at every barrier for a peer that is not running until the kernel
// moves one, which made 3 in 9 first decodes after a restart take 17-42 ms
// instead of ~4 ms on 2 cores (bench/HISTORY.md "CPU restart spread").
// Call it on the thread that will call Decode(), before its first decode.
bool BindComputeTeamToCpus(int n_threads);

}  // namespace agentkv::engine
