// RegisteredMemory's first step (MapFaultedIn) in every build: whole 2 MiB
// pages on a 2 MiB boundary, every page resident (mincore) and zero, the
// slack of the mapping given back; without CUDA, AllocateRegistered gives
// empty memory (StagingBuffer then falls back).
#include "engine/registered_memory.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

namespace agentkv::engine {
namespace {

constexpr size_t kHuge = size_t{2} << 20;

TEST(RegisteredMemoryTest, MapFaultedInGivesWholeAlignedHugePagesAllResidentAndZero) {
  const size_t size = 5 * (size_t{1} << 20) + 123;
  RegisteredMemory m = MapFaultedIn(size);
  ASSERT_NE(m.data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.data) % kHuge, 0u);
  EXPECT_EQ(m.map_bytes, 3 * kHuge);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident(m.map_bytes / page);
  ASSERT_EQ(mincore(m.data, m.map_bytes, resident.data()), 0);
  for (size_t i = 0; i < resident.size(); ++i) ASSERT_TRUE(resident[i] & 1) << "page " << i << " not faulted in";
  for (size_t i = 0; i < m.map_bytes; i += 4093) ASSERT_EQ(m.data[i], 0);
  m.data[m.map_bytes - 1] = 7;  // all of it is ours
  // The slack after it was unmapped (the mapping had one huge page more).
  unsigned char v = 0;
  EXPECT_NE(mincore(m.data + m.map_bytes, page, &v), 0);
  Unmap(&m);
  EXPECT_EQ(m.data, nullptr);
  EXPECT_EQ(m.map_bytes, 0u);
}

TEST(RegisteredMemoryTest, NothingForZeroBytesAndFreeingEmptyMemoryIsANoOp) {
  RegisteredMemory m = MapFaultedIn(0);
  EXPECT_EQ(m.data, nullptr);
  FreeRegistered(&m);
  Unmap(&m);
  EXPECT_EQ(m.data, nullptr);
}

#ifndef AGENTKV_CUDA
TEST(RegisteredMemoryTest, WithoutCudaNothingIsRegistered) {
  RegisteredMemory m = AllocateRegistered(kHuge);
  EXPECT_EQ(m.data, nullptr);
}
#endif

}  // namespace
}  // namespace agentkv::engine
