// libFuzzer target: DecodeBlockFile on arbitrary bytes (AGENTKV_FUZZ=ON,
// scripts/fuzz.sh). The custom mutator re-seals the checksum after each
// mutation so inputs reach the structural checks behind it.
//
// Oracle besides "no crash, no sanitizer report": a file that decodes must
// re-encode (the decoder accepts nothing the writer would refuse), and the
// re-encoded file must decode to the same block and metadata.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "store/block_file.h"
#include "store/fuzz_reseal.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace agentkv;
  Result<DecodedBlock> dec = DecodeBlockFile(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!dec.ok()) return 0;
  Result<std::string> again = EncodeBlockFile(dec->block, dec->meta);
  if (!again.ok()) {
    std::fprintf(stderr, "decoded but does not re-encode: %s\n", again.status().ToString().c_str());
    std::abort();
  }
  Result<DecodedBlock> dec2 = DecodeBlockFile(*again);
  if (!dec2.ok() || !(dec2->block == dec->block) || dec2->meta.block_id != dec->meta.block_id ||
      dec2->meta.parent_id != dec->meta.parent_id || dec2->meta.fingerprint != dec->meta.fingerprint ||
      dec2->meta.kv_types != dec->meta.kv_types) {
    std::fprintf(stderr, "re-encoded block decodes differently\n");
    std::abort();
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  size = LLVMFuzzerMutate(data, size, max_size);
  if (seed % 8 == 0) return size;  // sometimes keep the raw mutation: the checksum checks get fuzzed too
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!agentkv::fuzz::ResealBlockFile(&bytes) || bytes.size() > max_size) return size;
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}
