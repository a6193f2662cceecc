// StagingBuffer: a background reservation is adopted by the next Get(), which
// waits for it; a larger buffer in hand is kept; a reservation never read
// is freed with the buffer (ASan/TSan builds check the memory and the join).
#include "engine/staging_buffer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

namespace agentkv::engine {
namespace {

std::atomic<int> g_done{0};
std::atomic<size_t> g_done_bytes{0};

void CountDone(double ms, size_t bytes, const char* kind) {
  EXPECT_GE(ms, 0.0);
  EXPECT_STREQ(kind, "heap, faulted in");  // these tests ask for no page-locked memory
  g_done_bytes = bytes;
  ++g_done;
}

TEST(StagingBufferTest, GetAdoptsTheBackgroundReservationAndAllocatesNoMoreWithinIt) {
  g_done = 0;
  StagingBuffer buf(/*pinned=*/false);
  const size_t reserved = 8u << 20;
  buf.ReserveInBackground(reserved, &CountDone);
  std::span<uint8_t> first = buf.Get(4096);  // waits for the reservation
  EXPECT_EQ(g_done.load(), 1);
  EXPECT_EQ(g_done_bytes.load(), reserved);
  ASSERT_EQ(first.size(), 4096u);
  std::memset(first.data(), 0xab, first.size());
  // Up to the reserved size: the same memory (no new allocation).
  std::span<uint8_t> full = buf.Get(reserved);
  EXPECT_EQ(full.data(), first.data());
  EXPECT_EQ(full[4095], 0xab);
  std::memset(full.data(), 0xcd, full.size());  // every byte of it is ours to write
  // Beyond it: grows.
  EXPECT_EQ(buf.Get(reserved + 1).size(), reserved + 1);
  EXPECT_FALSE(buf.pinned());
}

// heap_bytes / page_locked_bytes (/metrics) count the memory held now: a
// reservation once ready (before a Get() adopts it), a grown buffer without
// the one it replaced, and the smaller of two freed when one is adopted.
TEST(StagingBufferTest, ByteCountsFollowWhatIsHeld) {
  StagingBuffer buf(/*pinned=*/false);
  EXPECT_EQ(buf.heap_bytes(), 0u);
  buf.Get(1u << 20);
  EXPECT_EQ(buf.heap_bytes(), 1u << 20);
  buf.Get(3u << 20);  // grows: the old one is freed
  EXPECT_EQ(buf.heap_bytes(), 3u << 20);
  buf.ReserveInBackground(2u << 20);
  buf.WaitReserved();  // ready, not yet adopted: both are held
  EXPECT_EQ(buf.heap_bytes(), 5u << 20);
  buf.Get(1);  // adopts: the larger (in hand) is kept
  EXPECT_EQ(buf.heap_bytes(), 3u << 20);
  EXPECT_EQ(buf.page_locked_bytes(), 0u);  // no GPU asked for
}

// WaitReserved (the server waits so before it serves) returns once the
// memory is ready and its on_done ran, without adopting it; the next Get()
// then takes it without allocating.
TEST(StagingBufferTest, WaitReservedReturnsOnceTheMemoryIsReady) {
  g_done = 0;
  StagingBuffer buf(/*pinned=*/false);
  buf.WaitReserved();  // nothing reserved: returns at once
  buf.ReserveInBackground(4u << 20, &CountDone);
  buf.WaitReserved();
  EXPECT_EQ(g_done.load(), 1);
  std::span<uint8_t> got = buf.Get(4u << 20);
  EXPECT_EQ(got.size(), 4u << 20);
  buf.WaitReserved();  // adopted: returns at once
}

TEST(StagingBufferTest, ASmallerReservationKeepsTheLargerBufferInHand) {
  StagingBuffer buf(/*pinned=*/false);
  std::span<uint8_t> big = buf.Get(1u << 20);
  buf.ReserveInBackground(4096);
  std::span<uint8_t> after = buf.Get(1u << 20);
  EXPECT_EQ(after.data(), big.data());
}

TEST(StagingBufferTest, AReservationNeverUsedIsJoinedAndFreedWithTheBuffer) {
  g_done = 0;
  {
    StagingBuffer buf(/*pinned=*/false);
    buf.ReserveInBackground(1u << 20, &CountDone);
    buf.ReserveInBackground(2u << 20, &CountDone);  // waits for the first
  }
  EXPECT_EQ(g_done.load(), 2);
}

}  // namespace
}  // namespace agentkv::engine
