// libFuzzer target: DecodeManifest on arbitrary bytes (AGENTKV_FUZZ=ON,
// scripts/fuzz.sh). The custom mutator re-seals the checksum (and the block
// ids) after each mutation so inputs reach the record checks behind them.
//
// Oracle besides "no crash, no sanitizer report": a manifest that decodes
// must re-encode, and the re-encoding must decode to an equal record.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "store/fuzz_reseal.h"
#include "store/manifest.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace agentkv;
  Result<AgentRecord> rec = DecodeManifest(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!rec.ok()) return 0;
  Result<std::string> again = EncodeManifest(*rec);
  if (!again.ok()) {
    std::fprintf(stderr, "decoded but does not re-encode: %s\n", again.status().ToString().c_str());
    std::abort();
  }
  Result<AgentRecord> rec2 = DecodeManifest(*again);
  if (!rec2.ok() || !(*rec2 == *rec)) {
    std::fprintf(stderr, "re-encoded manifest decodes differently\n");
    std::abort();
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  size = LLVMFuzzerMutate(data, size, max_size);
  if (seed % 8 == 0) return size;  // sometimes keep the raw mutation
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!agentkv::fuzz::ResealManifest(&bytes) || bytes.size() > max_size) return size;
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}
