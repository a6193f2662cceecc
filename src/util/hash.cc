#include "util/hash.h"

#include <cstdio>

#include "hash/hash.h"  // llama.cpp vendor/hash: hash_sha256_hex
#define XXH_INLINE_ALL
#include "hash/xxhash/xxhash.h"

namespace agentkv {

uint64_t Xxh3_64(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

std::string Sha256Hex(const void* data, size_t size) { return hash_sha256_hex(data, size); }

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Xxh3Stream::Xxh3Stream(uint64_t seed) : state_(XXH3_createState()) {
  XXH3_64bits_reset_withSeed(static_cast<XXH3_state_t*>(state_), seed);
}
Xxh3Stream::~Xxh3Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Xxh3Stream::Update(const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}
uint64_t Xxh3Stream::Digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }

}  // namespace agentkv
