// Allocation probe (issue 11): what a load of a 2K-token agent of the
// Llama-3.1-8B shape pays for its blocks' fresh memory, apart from any read:
// 8 blocks x 64 tensors of 256 x 576 bytes (147 KB, above glibc's default
// 128 KiB mmap threshold, so each is its own mmap in a fresh process), all
// bytes touched, by N threads. Modes (run each in a fresh process):
//   tensors  one vector per tensor, sized (zero-filled), as the store's readers did until 71c68c1
//   slab     one malloc per block (9.4 MB), touched: the same bytes in 8 allocations
//   huge     one 2 MiB-aligned mmap per block with MADV_HUGEPAGE, touched (THP "madvise" mode)
// Build: g++ -O2 -pthread bench/tools/alloc_probe.cc -o /tmp/alloc_probe
// Run:   /tmp/alloc_probe [threads=8] [tensors|slab|huge];
//        compare MALLOC_MMAP_THRESHOLD_=67108864 /tmp/alloc_probe
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 8;
  const std::string mode = argc > 2 ? argv[2] : "tensors";
  const size_t blocks = 8, per_block = 64, sz = 256 * 576, block_bytes = per_block * sz;
  std::vector<std::vector<unsigned char>> bufs(blocks * per_block);
  std::vector<void*> slabs(blocks);
  std::atomic<size_t> next{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      if (mode == "tensors") {
        for (size_t i; (i = next++) < bufs.size();) bufs[i].resize(sz);
        return;
      }
      for (size_t b; (b = next++) < blocks;) {
        if (mode == "slab") {
          slabs[b] = malloc(block_bytes);
        } else {  // huge
          const size_t huge = size_t{2} << 20, len = (block_bytes + huge - 1) / huge * huge;
          char* p = static_cast<char*>(mmap(nullptr, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
          p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + huge - 1) & ~uintptr_t{huge - 1});
          madvise(p, len, MADV_HUGEPAGE);
          slabs[b] = p;
        }
        memset(slabs[b], 1, block_bytes);
      }
    });
  }
  for (auto& t : ts) t.join();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  printf("%s, %d threads: %.1f ms for %.1f MB\n", mode.c_str(), threads, ms, blocks * block_bytes / 1e6);
}
