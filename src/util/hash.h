#pragma once
// Hashes used across agentkv. XXH3-64 for checksums and content ids (fast,
// vendored once by llama.cpp), SHA-256 where identity must resist collisions
// (model fingerprints).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace agentkv {

uint64_t Xxh3_64(const void* data, size_t size, uint64_t seed = 0);
inline uint64_t Xxh3_64(std::string_view s, uint64_t seed = 0) { return Xxh3_64(s.data(), s.size(), seed); }

// Lowercase hex SHA-256 of the bytes.
std::string Sha256Hex(const void* data, size_t size);
inline std::string Sha256Hex(std::string_view s) { return Sha256Hex(s.data(), s.size()); }

// 16 lowercase hex digits, zero padded.
std::string Hex64(uint64_t v);

// Streaming XXH3-64 (for hashing a file without loading it whole).
class Xxh3Stream {
 public:
  explicit Xxh3Stream(uint64_t seed = 0);
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void Update(const void* data, size_t size);
  uint64_t Digest() const;

 private:
  void* state_;
};

}  // namespace agentkv
