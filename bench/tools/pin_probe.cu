// pin_probe: what page-locking a one-slot buffer (1.37 GB at 32K, 8B shape)
// costs, and whether the rest of the process stalls meanwhile (issue 34's
// start-up gap; bench/RESULTS.md stop 32). Ways to get page-locked memory:
//   malloc_host:   cudaMallocHost (what ggml's CUDA host buffer type does)
//   register:      mmap + pages faulted in by memset, then cudaHostRegister
//   register_thp:  the same with madvise(MADV_HUGEPAGE) before the memset
//   two_parallel:  two cudaMallocHost at once on two threads (the wall time)
// Each way runs with an observer thread beside it (--observer): `faults`
// touches a fresh 512 MB heap buffer page by page, `cuda` copies 4 KB to the
// device in a loop; the observer's longest single step says whether it stalled.
// Prints one JSON object per line. Build: nvcc -O2 -o pin_probe pin_probe.cu
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Observed {
  double max_step_ms = 0;
  long steps = 0;
};

// Runs the observer until `stop`; returns its longest step.
Observed Observe(const std::string& kind, const std::atomic<bool>& stop) {
  Observed o;
  if (kind == "faults") {
    const size_t bytes = 512ull << 20;
    auto* p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    size_t off = 0;
    while (!stop.load()) {
      const auto t = Clock::now();
      p[off] = 1;  // one new page per step
      const double ms = MsSince(t);
      o.max_step_ms = std::max(o.max_step_ms, ms);
      ++o.steps;
      off += 4096;
      if (off >= bytes) {
        munmap(p, bytes);
        p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        off = 0;
      }
    }
    munmap(p, bytes);
  } else if (kind == "cuda") {
    void* d = nullptr;
    Check(cudaMalloc(&d, 4096), "cudaMalloc");
    std::vector<char> h(4096, 1);
    while (!stop.load()) {
      const auto t = Clock::now();
      Check(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
      o.max_step_ms = std::max(o.max_step_ms, MsSince(t));
      ++o.steps;
    }
    cudaFree(d);
  }
  return o;
}

// Page-locks `bytes` one way; returns the ms it took (the memory is freed after).
double PinOnce(const std::string& way, size_t bytes, double* fault_ms) {
  *fault_ms = 0;
  const auto t = Clock::now();
  if (way == "malloc_host") {
    void* p = nullptr;
    Check(cudaMallocHost(&p, bytes), "cudaMallocHost");
    const double ms = MsSince(t);
    cudaFreeHost(p);
    return ms;
  }
  if (way == "register" || way == "register_thp") {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (way == "register_thp") madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(p, 0, bytes);
    *fault_ms = MsSince(t);
    const auto t2 = Clock::now();
    Check(cudaHostRegister(p, bytes, cudaHostRegisterDefault), "cudaHostRegister");
    const double ms = MsSince(t2);
    cudaHostUnregister(p);
    munmap(p, bytes);
    return ms;
  }
  if (way == "two_parallel") {
    void* p[2] = {nullptr, nullptr};
    std::thread a([&] { Check(cudaMallocHost(&p[0], bytes), "cudaMallocHost"); });
    std::thread b([&] { Check(cudaMallocHost(&p[1], bytes), "cudaMallocHost"); });
    a.join();
    b.join();
    const double ms = MsSince(t);
    cudaFreeHost(p[0]);
    cudaFreeHost(p[1]);
    return ms;
  }
  std::fprintf(stderr, "unknown way %s\n", way.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1368800000ull;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  Check(cudaFree(nullptr), "cuda init");
  for (int rep = 0; rep < reps; ++rep) {
    for (const char* way : {"malloc_host", "register", "register_thp", "two_parallel"}) {
      for (const char* observer : {"none", "faults", "cuda"}) {
        std::atomic<bool> stop{false};
        Observed seen;
        std::thread obs;
        if (std::string(observer) != "none") obs = std::thread([&] { seen = Observe(observer, stop); });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        double fault_ms = 0;
        const double pin_ms = PinOnce(way, bytes, &fault_ms);
        stop = true;
        if (obs.joinable()) obs.join();
        std::printf("{\"rep\": %d, \"way\": \"%s\", \"observer\": \"%s\", \"bytes\": %zu, \"fault_ms\": %.1f, "
                    "\"pin_ms\": %.1f, \"observer_max_step_ms\": %.2f, \"observer_steps\": %ld}\n",
                    rep, way, observer, bytes, fault_ms, pin_ms, seen.max_step_ms, seen.steps);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
