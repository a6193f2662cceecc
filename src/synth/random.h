#pragma once
// Fast seeded random numbers for synthetic weights: xoshiro256** seeded by
// splitmix64. Not cryptographic; the point is speed (billions of draws) and
// bit-exact reproducibility across platforms (integer-only state updates).
//
// Thread safety: an instance is not thread-safe; use one per stream.

#include <cstdint>

namespace agentkv::synth {

inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (auto& s : s_) s = SplitMix64(seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Approximately standard normal: the Irwin-Hall sum of the four 16-bit
  // lanes of one draw, centred and scaled to unit variance. Bounded by
  // |x| < 3.47, which keeps random activations finite through deep stacks.
  float NextNormalish() {
    const uint64_t r = Next();
    const uint32_t sum = static_cast<uint32_t>(r & 0xffff) + static_cast<uint32_t>((r >> 16) & 0xffff) +
                         static_cast<uint32_t>((r >> 32) & 0xffff) + static_cast<uint32_t>(r >> 48);
    // Mean 2*65535, variance 4 * (65536^2 - 1) / 12 ~= 65536^2 / 3.
    constexpr float kScale = 1.7320508f / 65536.0f;
    return (static_cast<float>(sum) - 131070.0f) * kScale;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace agentkv::synth
