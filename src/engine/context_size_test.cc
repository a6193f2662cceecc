#include "engine/context_size.h"

#include <gtest/gtest.h>

#include "engine/model.h"

namespace agentkv::engine {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// Llama-3.1-8B's attention: 32 layers, 8 KV heads of 128 values, 131072 trained.
ModelInfo Llama31_8B() {
  ModelInfo info;
  info.n_layer = 32;
  info.n_embd = 4096;
  info.n_head = 32;
  info.n_head_kv = 8;
  info.n_embd_head_k = info.n_embd_head_v = 128;
  info.n_ctx_train = 131072;
  return info;
}

TEST(ContextSizeTest, PrefillChunkDefaultsByWhereTheLayersRun) {
  EXPECT_EQ(ChoosePrefillChunk(0, 0), kCpuPrefillChunk);
  EXPECT_EQ(ChoosePrefillChunk(0, 33), kGpuPrefillChunk);
  EXPECT_EQ(ChoosePrefillChunk(256, 33), 256);  // asked for: taken as is
  EXPECT_EQ(ChoosePrefillChunk(4096, 0), 4096);
}

TEST(ContextSizeTest, KvBytesPerTokenOfLlama31_8B) {
  // 1024 values per row: f16 2048 B; q4_0 32 blocks of 18 B = 576 B; K and V, 32 layers.
  EXPECT_EQ(EstimateKvBytesPerToken(Llama31_8B(), KvType::kF16, KvType::kF16), 131072u);
  EXPECT_EQ(EstimateKvBytesPerToken(Llama31_8B(), KvType::kQ4_0, KvType::kQ4_0), 36864u);
  EXPECT_EQ(EstimateKvBytesPerToken(ModelInfo{}, KvType::kF16, KvType::kF16), 0u);
}

TEST(ContextSizeTest, ATrainedContextThatFitsIsTaken) {
  // An H200 with the weights loaded: q4_0 slots, 4 x 131072 x 36 KiB = 18 GiB.
  const ContextSizeChoice c = ChooseSlotContext({131072, 4, 36864, 130 * kGiB, "GPU memory"});
  EXPECT_EQ(c.slot_ctx, 131072);
  EXPECT_FALSE(c.capped);
  EXPECT_NE(c.reason.find("trained"), std::string::npos) << c.reason;
}

TEST(ContextSizeTest, SmallRamCapsTheContextInWholeBlocks) {
  // 8 GiB left for KV on a CPU; f16 slots of 128 KiB/token, 4 of them:
  // 8 GiB x 0.9 / 512 KiB = 14745.6 -> 14592 (57 blocks).
  const ContextSizeChoice c = ChooseSlotContext({131072, 4, 131072, 8 * kGiB, "RAM"});
  EXPECT_EQ(c.slot_ctx, 14592);
  EXPECT_EQ(c.slot_ctx % kContextGranuleTokens, 0);
  EXPECT_TRUE(c.capped);
  EXPECT_FALSE(c.at_floor);
  // The reason says what capped it, with the numbers.
  EXPECT_NE(c.reason.find("capped by RAM: 8.0 GiB available, 4 slots x 128 KiB/token"), std::string::npos)
      << c.reason;
  // One slot gets four times the positions.
  EXPECT_EQ(ChooseSlotContext({131072, 1, 131072, 8 * kGiB, "RAM"}).slot_ctx, 58880);
}

TEST(ContextSizeTest, NeverBelowTheFloor) {
  // 512 MiB for 4 f16 slots fits 921 positions: the floor of 2048 is taken anyway.
  const ContextSizeChoice c = ChooseSlotContext({131072, 4, 131072, kGiB / 2, "RAM"});
  EXPECT_EQ(c.slot_ctx, kMinDefaultContextTokens);
  EXPECT_TRUE(c.capped);
  EXPECT_TRUE(c.at_floor);
  EXPECT_NE(c.reason.find("floor"), std::string::npos) << c.reason;
  // No memory at all (the weights and the pool took it): still the floor.
  EXPECT_EQ(ChooseSlotContext({131072, 4, 131072, 0, "RAM"}).slot_ctx, kMinDefaultContextTokens);
  // A trained context below the floor is the floor.
  EXPECT_EQ(ChooseSlotContext({512, 4, 131072, 0, "RAM"}).slot_ctx, 512);
}

TEST(ContextSizeTest, HostBuffersBesideCpuSlotsCountAgainstTheSameRam) {
  // 4 f16 slots (128 KiB/token each) + staging and landing (f16) + read reserve (q4_0) = 4x128 + 2x128 + 36 KiB:
  // 8 GiB x 0.9 / 804 KiB = 9390 -> 9216.
  ContextSizeInput in{131072, 4, 131072, 8 * kGiB, "RAM"};
  in.host_bytes_per_token = 2 * 131072 + 36864;
  const ContextSizeChoice c = ChooseSlotContext(in);
  EXPECT_EQ(c.slot_ctx, 9216);
  EXPECT_NE(c.reason.find("+ 292 KiB/token of host buffers"), std::string::npos) << c.reason;
}

TEST(ContextSizeTest, HostBuffersOfGpuSlotsAreCappedByRam) {
  // q4_0 slots on a GPU with room for the trained context, but only 4 GiB of RAM for 3 x 36 KiB/token of host
  // buffers: 4 GiB x 0.9 / 108 KiB = 34952 -> 34816.
  ContextSizeInput in{131072, 4, 36864, 130 * kGiB, "GPU memory"};
  in.host_bytes_per_token = 3 * 36864;
  in.host_available_bytes = 4 * kGiB;
  const ContextSizeChoice c = ChooseSlotContext(in);
  EXPECT_EQ(c.slot_ctx, 34816);
  EXPECT_NE(c.reason.find("capped by RAM: 4.0 GiB available, 108 KiB/token of host buffers"), std::string::npos)
      << c.reason;
  // With RAM to spare, the GPU's memory decides again.
  in.host_available_bytes = 100 * kGiB;
  EXPECT_EQ(ChooseSlotContext(in).slot_ctx, 131072);
}

TEST(ContextSizeTest, TrainedContextIsRoundedAndUnknownIsTheFloor) {
  EXPECT_EQ(ChooseSlotContext({131000, 1, 0, 0, "RAM"}).slot_ctx, 130816);  // no memory figure: no cap
  EXPECT_EQ(ChooseSlotContext({2048, 4, 4096, 64 * kGiB, "RAM"}).slot_ctx, 2048);  // the bundled model
  EXPECT_EQ(ChooseSlotContext({100, 4, 4096, 64 * kGiB, "RAM"}).slot_ctx, 100);    // less than one block
  const ContextSizeChoice unknown = ChooseSlotContext({0, 4, 4096, 64 * kGiB, "RAM"});
  EXPECT_EQ(unknown.slot_ctx, kMinDefaultContextTokens);
  EXPECT_NE(unknown.reason.find("unknown"), std::string::npos) << unknown.reason;
}

}  // namespace
}  // namespace agentkv::engine
