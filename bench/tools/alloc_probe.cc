// Allocation probe (issue 11): what a warm load of a 2K-token agent of the
// Llama-3.1-8B shape pays for its blocks' fresh memory, before any byte is
// read: 8 blocks x 64 tensors of 256 x 576 bytes (147 KB, above glibc's
// default 128 KiB mmap threshold, so each is its own mmap in a fresh process),
// sized (zero-filled) by N threads, as the store's readers do.
// Build: g++ -O2 -pthread bench/tools/alloc_probe.cc -o /tmp/alloc_probe
// Run:   /tmp/alloc_probe [threads=8]; compare MALLOC_MMAP_THRESHOLD_=67108864 /tmp/alloc_probe
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include <atomic>
#include <cstdlib>
int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 8;
  size_t n = 8 * 64, sz = 256 * 576;  // a 2K agent of the 8B shape: 8 blocks x 64 tensors of 147 KB
  std::vector<std::vector<unsigned char>> bufs(n);
  std::atomic<size_t> next{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back([&] { for (size_t i; (i = next++) < n;) bufs[i].resize(sz); });
  for (auto& t : ts) t.join();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  printf("%d threads: %.1f ms for %.1f MB\n", threads, ms, n * sz / 1e6);
}
