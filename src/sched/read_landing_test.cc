// ReadLanding on synthetic blocks: one ticket at a time, and a state only
// when every planned block landed and the admitted blocks are those blocks.
#include "sched/read_landing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace agentkv::sched {
namespace {

// Two layers of K and V, 72-byte rows.
engine::StateShape Shape() {
  engine::SectionShape s;
  s.n_layer = 2;
  s.k_type = s.v_type = {2, 2};
  s.k_row_bytes = s.v_row_bytes = {72, 72};
  return {{s}};
}

KvBlock Block(uint32_t index, uint32_t n_tokens) {
  KvBlock b;
  b.index = index;
  b.n_tokens = n_tokens;
  for (const char* kv : {"k", "v"}) {
    for (int l = 0; l < 2; ++l) {
      KvTensor t;
      t.name = "c0.l" + std::to_string(l) + "." + kv;
      t.row_bytes = 72;
      t.first_pos = b.first_pos();
      t.n_rows = n_tokens;
      t.data.resize(uint64_t{n_tokens} * 72);
      for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<uint8_t>(i * 7 + index * 13 + l + kv[0]);
      b.tensors.push_back(std::move(t));
    }
  }
  return b;
}

struct Agent {
  std::vector<KvBlock> blocks;
  std::vector<BlockRef> refs;
  std::vector<PoolBlock> pool;
};

Agent MakeAgent(std::vector<uint32_t> sizes) {
  Agent a;
  for (uint32_t i = 0; i < sizes.size(); ++i) {
    a.blocks.push_back(Block(i, sizes[i]));
    a.refs.push_back({"id" + std::to_string(i), sizes[i], 0, 0});
  }
  for (size_t i = 0; i < a.blocks.size(); ++i) a.pool.push_back({a.refs[i].id, std::make_shared<KvBlock>(a.blocks[i])});
  return a;
}

TEST(ReadLandingTest, ALandedReadGivesTheStateOfItsBlocks) {
  const engine::StateShape shape = Shape();
  const auto layout = engine::KvLayout::Same(shape);
  ReadLanding landing(layout, 2, engine::MaxStateBytes(shape, 1024, 2), /*pinned=*/false);
  const Agent a = MakeAgent({256, 256, 40});
  std::vector<const KvBlock*> ptrs;
  for (const auto& b : a.blocks) ptrs.push_back(&b);
  auto want = engine::BlocksToState(ptrs, layout, 552, 2);
  ASSERT_TRUE(want.ok());

  auto ticket = landing.Reserve();
  ASSERT_NE(ticket, nullptr);
  EXPECT_EQ(landing.Reserve(), nullptr) << "one read at a time";
  ticket->OnPlan(0, a.refs);
  EXPECT_EQ(ticket->n_tokens(), 552u);
  for (uint32_t i : {2, 0}) ticket->OnBlockRead(i, a.blocks[i]);
  EXPECT_TRUE(ticket->StateFor(a.pool).empty()) << "block 1 has not landed";
  ticket->OnBlockRead(1, a.blocks[1]);
  std::span<const uint8_t> got = ticket->StateFor(a.pool);
  ASSERT_EQ(got.size(), want->size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want->begin()));

  // Not those blocks: fewer (a manifest that names fewer, a cut), or another id.
  EXPECT_TRUE(ticket->StateFor({a.pool[0], a.pool[1]}).empty());
  std::vector<PoolBlock> other = a.pool;
  other[1].id = "other";
  EXPECT_TRUE(ticket->StateFor(other).empty());

  ticket.reset();
  EXPECT_NE(landing.Reserve(), nullptr) << "free again once the ticket is gone";
}

TEST(ReadLandingTest, NothingLandsForPartialPlansOversizeOrBadBlocks) {
  const engine::StateShape shape = Shape();
  const auto layout = engine::KvLayout::Same(shape);
  ReadLanding landing(layout, 1, engine::MaxStateBytes(shape, 512, 1), /*pinned=*/false);
  const Agent a = MakeAgent({256, 100});

  auto from_block_1 = landing.Reserve();
  from_block_1->OnPlan(1, std::span<const BlockRef>(a.refs).subspan(1));
  from_block_1->OnBlockRead(1, a.blocks[1]);
  EXPECT_TRUE(from_block_1->StateFor({a.pool[1]}).empty());
  from_block_1.reset();

  const Agent big = MakeAgent({256, 256, 1});  // 513 positions > the 512 of the capacity
  auto oversize = landing.Reserve();
  oversize->OnPlan(0, big.refs);
  for (uint32_t i = 0; i < 3; ++i) oversize->OnBlockRead(i, big.blocks[i]);
  EXPECT_TRUE(oversize->StateFor(big.pool).empty());
  oversize.reset();

  auto bad = landing.Reserve();
  bad->OnPlan(0, a.refs);
  KvBlock lacking = a.blocks[1];
  lacking.tensors.pop_back();
  bad->OnBlockRead(0, a.blocks[0]);
  bad->OnBlockRead(1, lacking);
  EXPECT_TRUE(bad->StateFor(a.pool).empty());
}

}  // namespace
}  // namespace agentkv::sched
