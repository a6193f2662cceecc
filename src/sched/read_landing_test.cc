// ReadLanding on synthetic blocks: one ticket at a time, and a state only
// when every planned block landed and the admitted blocks are those blocks.
#include "sched/read_landing.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "engine/seq_state_test_support.h"

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

// What a restore from a's blocks imports: the state every landing must equal.
Result<std::vector<uint8_t>> StateOf(const Agent& a, const engine::KvLayout& layout, uint32_t n_tokens,
                                     uint32_t n_stream) {
  return engine::testing::StateOfBlocks(engine::testing::Ptrs(a.blocks), layout, n_tokens, n_stream);
}

// A landing of two streams and an agent of 552 positions (blocks of 256,
// 256, 40) with the state its restore imports.
struct ThreeBlocks {
  const engine::StateShape shape = Shape();
  const engine::KvLayout layout = engine::KvLayout::Same(shape);
  ReadLanding landing{layout, 2, engine::MaxStateBytes(shape, 1024, 2), /*pinned=*/false};
  const Agent a = MakeAgent({256, 256, 40});
  Result<std::vector<uint8_t>> want = StateOf(a, layout, 552, 2);
};

TEST(ReadLandingTest, ALandedReadGivesTheStateOfItsBlocks) {
  ThreeBlocks t;
  ASSERT_TRUE(t.want.ok());

  auto ticket = t.landing.Reserve();
  ASSERT_NE(ticket, nullptr);
  EXPECT_EQ(t.landing.Reserve(), nullptr) << "one read at a time";
  ticket->OnPlan(0, t.a.refs);
  EXPECT_EQ(ticket->n_tokens(), 552u);
  for (uint32_t i : {2, 0}) ticket->OnBlockRead(i, t.a.blocks[i]);
  EXPECT_TRUE(ticket->StateFor(t.a.pool).empty()) << "block 1 has not landed";
  ticket->OnBlockRead(1, t.a.blocks[1]);
  std::span<const uint8_t> got = ticket->StateFor(t.a.pool);
  ASSERT_EQ(got.size(), t.want->size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), t.want->begin()));

  // Not those blocks: fewer (a manifest that names fewer, a cut), or another id.
  EXPECT_TRUE(ticket->StateFor({t.a.pool[0], t.a.pool[1]}).empty());
  std::vector<PoolBlock> other = t.a.pool;
  other[1].id = "other";
  EXPECT_TRUE(ticket->StateFor(other).empty());

  ticket.reset();
  EXPECT_NE(t.landing.Reserve(), nullptr) << "free again once the ticket is gone";
}

// A landing reserved on a thread of its own (the server's default, kBeside,
// and --landing-reserve background): Reserve() never waits and gives no
// ticket until the memory is reserved (reads take the unlanded route
// meanwhile); once WaitReserved returned, a ticket lands a read as the
// landing reserved in the constructor does.
TEST(ReadLandingTest, ALandingReservedOnItsOwnThreadLandsOnceReady) {
  const engine::StateShape shape = Shape();
  const engine::KvLayout layout = engine::KvLayout::Same(shape);
  const Agent a = MakeAgent({256, 256, 40});
  Result<std::vector<uint8_t>> want = StateOf(a, layout, 552, 2);
  ASSERT_TRUE(want.ok());
  using When = engine::StagingBuffer::When;
  for (When when : {When::kBeside, When::kBackground}) {
    ReadLanding landing(layout, 2, engine::MaxStateBytes(shape, 1024, 2), /*pinned=*/false, when);
    landing.WaitReserved();
    std::shared_ptr<ReadLanding::Ticket> ticket = landing.Reserve();
    ASSERT_NE(ticket, nullptr) << "no ticket after WaitReserved, when " << static_cast<int>(when);
    ticket->OnPlan(0, a.refs);
    for (uint32_t i : {0, 1, 2}) ticket->OnBlockRead(i, a.blocks[i]);
    std::span<const uint8_t> got = ticket->StateFor(a.pool);
    ASSERT_EQ(got.size(), want->size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want->begin()));
  }
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

// What a streaming read hands the ticket: block b's data section (tensors in
// order), as ReadBlockFiles has read it into `layout`'s tensors.
BlockFileLayout LayoutOf(const KvBlock& b) {
  BlockFileLayout l;
  l.decoded.block = b;
  for (size_t k = 0; k < b.tensors.size(); ++k) l.file_order.push_back(k);
  return l;
}

TEST(ReadLandingTest, AStreamedReadLandsEachRowCopyOnceEveryBlocksTensorForItIsIn) {
  ThreeBlocks t;
  ASSERT_TRUE(t.want.ok());

  auto ticket = t.landing.Reserve();
  std::atomic<int> records{0};  // on_progress calls
  ticket->Stream([&] { ++records; });
  EXPECT_FALSE(ticket->Planned());
  ticket->OnPlan(0, t.a.refs);
  ASSERT_TRUE(ticket->Streams());
  ASSERT_NE(ticket->writer(), nullptr);
  EXPECT_TRUE(ticket->Planned());
  EXPECT_EQ(records.load(), 1) << "told of the plan";
  EXPECT_EQ(ticket->EarlyRecord(), nullptr);
  AgentRecord rec;
  rec.agent_id = "a";
  ticket->OnRecord(rec);
  EXPECT_EQ(records.load(), 2) << "told of the manifest";
  ASSERT_NE(ticket->EarlyRecord(), nullptr);
  EXPECT_EQ(ticket->EarlyRecord()->agent_id, "a");

  // Row copy 0 (layer 0's K rows) waits for every block's c0.l0.k.
  const engine::BlocksStateWriter& w = *ticket->writer();
  const auto [k0_begin, k0_end] = w.RowBytes(0);
  ASSERT_EQ(w.RowTensorName(0), "c0.l0.k");
  EXPECT_TRUE(ticket->Landed(0, 8)) << "headers are in from the start";
  EXPECT_FALSE(ticket->Landed(k0_begin, k0_end - k0_begin));
  std::atomic<bool> k0_ready{false};
  std::thread waiter([&] {
    while (!ticket->WaitLanded(k0_begin, k0_end - k0_begin, std::chrono::milliseconds(1))) {
    }
    k0_ready = true;
  });
  std::vector<BlockFileLayout> layouts;
  for (const KvBlock& b : t.a.blocks) layouts.push_back(LayoutOf(b));
  // Blocks 0 and 1 whole, block 2's first tensor in two ranges but its last byte.
  for (uint32_t i : {0u, 1u}) ticket->OnDataRead(i, layouts[i], 0, 4 * uint64_t{256} * 72);
  const uint64_t t2 = uint64_t{40} * 72;
  ticket->OnDataRead(2, layouts[2], 0, 100);
  ticket->OnDataRead(2, layouts[2], 100, t2 - 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(k0_ready.load()) << "block 2's c0.l0.k is one byte short";
  EXPECT_FALSE(ticket->Landed(k0_begin, k0_end - k0_begin));
  ticket->OnDataRead(2, layouts[2], t2 - 1, 4 * t2);
  waiter.join();
  EXPECT_TRUE(k0_ready.load());
  EXPECT_TRUE(ticket->Landed(k0_begin, k0_end - k0_begin));

  // Rows are used only once every planned block is verified.
  for (uint32_t i : {0u, 1u}) ticket->OnBlockRead(i, t.a.blocks[i]);
  EXPECT_TRUE(ticket->StateFor(t.a.pool).empty());
  ticket->OnBlockRead(2, t.a.blocks[2]);
  std::span<const uint8_t> got = ticket->StateFor(t.a.pool);
  ASSERT_EQ(got.size(), t.want->size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), t.want->begin()));
}

// A bounded wait for rows that do not come returns after its timeout, and
// at once (still not landed) once the ticket is abandoned.
TEST(ReadLandingTest, AbandonReleasesWaitsForRowsThatNeverCome) {
  const engine::StateShape shape = Shape();
  const auto layout = engine::KvLayout::Same(shape);
  ReadLanding landing(layout, 1, engine::MaxStateBytes(shape, 512, 1), /*pinned=*/false);
  const Agent a = MakeAgent({256, 100});
  auto ticket = landing.Reserve();
  ticket->Stream([] {});
  ticket->OnPlan(0, a.refs);
  ticket->OnDataRead(0, LayoutOf(a.blocks[0]), 0, 4 * uint64_t{256} * 72);  // block 1 never comes
  const auto [begin, end] = ticket->writer()->RowBytes(3);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ticket->WaitLanded(begin, end - begin, std::chrono::milliseconds(5)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(5));
  bool landed = true;
  std::thread waiter([&] { landed = ticket->WaitLanded(begin, end - begin, std::chrono::seconds(60)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto t1 = std::chrono::steady_clock::now();
  ticket->Abandon();
  waiter.join();  // released
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(30));
  EXPECT_FALSE(landed);
  EXPECT_TRUE(ticket->Final());
  EXPECT_FALSE(ticket->Landed(begin, end - begin));
  ticket->OnBlockRead(0, a.blocks[0]);
  EXPECT_TRUE(ticket->StateFor(a.pool).empty());
}

}  // namespace
}  // namespace agentkv::sched
