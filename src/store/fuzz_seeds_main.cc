// agentkv_fuzz_seeds BLOCK_DIR MANIFEST_DIR [N]: writes N (default 16) valid
// block files and manifests as the fuzzers' seed corpora (scripts/fuzz.sh).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "store/fuzz_reseal.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s BLOCK_DIR MANIFEST_DIR [N]\n", argv[0]);
    return 2;
  }
  const int n = argc > 3 ? std::atoi(argv[3]) : 16;
  for (int i = 0; i < n; ++i) {
    const auto seed = static_cast<uint32_t>(i);
    std::ofstream(std::string(argv[1]) + "/seed-" + std::to_string(i), std::ios::binary)
        << agentkv::fuzz::SeedBlockFile(seed);
    std::ofstream(std::string(argv[2]) + "/seed-" + std::to_string(i), std::ios::binary)
        << agentkv::fuzz::SeedManifest(seed);
  }
  return 0;
}
