#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

namespace agentkv {
namespace {

constexpr size_t kPayload = 1000;
constexpr size_t kCharge = kPayload + kBlockOverheadBytes;

std::shared_ptr<const KvBlock> MakeBlock(uint32_t index, uint8_t fill, size_t payload = kPayload) {
  auto b = std::make_shared<KvBlock>();
  b->index = index;
  b->n_tokens = kBlockTokens;
  b->tensors.push_back({"c0.l0.k", static_cast<uint32_t>(payload), index * kBlockTokens, 1,
                        KvBytes(payload, fill)});
  return b;
}

// n blocks with ids "<prefix>0", "<prefix>1", ...
std::vector<PoolBlock> Blocks(const std::string& prefix, int n, uint8_t fill = 1) {
  std::vector<PoolBlock> out;
  for (int i = 0; i < n; ++i) out.push_back({prefix + std::to_string(i), MakeBlock(i, fill)});
  return out;
}

AgentKey A(const std::string& id, const std::string& ns = "ns") { return {ns, id}; }

BlockPoolOptions Options(size_t n_blocks_budget) {
  BlockPoolOptions o;
  o.budget_bytes = n_blocks_budget * kCharge;
  return o;
}

TEST(BlockPoolTest, BudgetRespectedAfterManyInserts) {
  BlockPool pool(Options(10));
  for (int i = 0; i < 100; ++i) {
    const std::string id = "agent" + std::to_string(i);
    ASSERT_TRUE(pool.Put(A(id), Blocks(id + "/", 2), /*dirty=*/false).ok()) << i;
    BlockPoolStats s = pool.Stats();
    ASSERT_LE(s.used_bytes, s.budget_bytes);
    ASSERT_EQ(s.used_bytes, s.n_blocks * kCharge);
  }
  BlockPoolStats s = pool.Stats();
  EXPECT_EQ(s.n_agents, 5u);
  EXPECT_EQ(s.evictions, 95u);
  EXPECT_TRUE(pool.Contains(A("agent99")));
  EXPECT_FALSE(pool.Contains(A("agent94")));
}

TEST(BlockPoolTest, LruOrderAndObserver) {
  std::vector<std::string> evicted;
  BlockPool* self = nullptr;
  BlockPoolOptions o = Options(3);
  o.on_evict = [&](const EvictionEvent& e) {
    EXPECT_FALSE(self->Contains(e.agent));  // called unlocked: may call back into the pool
    evicted.push_back(e.agent.agent_id);
  };
  BlockPool pool(o);
  self = &pool;
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(pool.Put(A(id), Blocks(id, 1), /*dirty=*/false).ok());
  ASSERT_TRUE(pool.Get(A("a")).ok());  // a is now most recent
  EXPECT_TRUE(pool.Contains(A("b")));  // Contains does not touch
  ASSERT_TRUE(pool.Put(A("d"), Blocks("d", 1), false).ok());
  ASSERT_TRUE(pool.Put(A("e"), Blocks("e", 1), false).ok());
  EXPECT_EQ(evicted, (std::vector<std::string>{"b", "c"}));
  std::vector<AgentInfo> list = pool.ListAgents("ns");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].key.agent_id, "e");
  EXPECT_EQ(list[1].key.agent_id, "d");
  EXPECT_EQ(list[2].key.agent_id, "a");
}

TEST(BlockPoolTest, PinnedAgentsAreNotEvicted) {
  BlockPool pool(Options(2));
  ASSERT_TRUE(pool.Put(A("a"), Blocks("a", 1), false).ok());
  ASSERT_TRUE(pool.Put(A("b"), Blocks("b", 1), false).ok());
  ASSERT_TRUE(pool.Pin(A("a")).ok());
  ASSERT_TRUE(pool.Pin(A("a")).ok());  // nests
  pool.Unpin(A("a"));
  ASSERT_TRUE(pool.Put(A("c"), Blocks("c", 1), false).ok());  // evicts b, not a
  EXPECT_TRUE(pool.Contains(A("a")));
  EXPECT_FALSE(pool.Contains(A("b")));
  ASSERT_TRUE(pool.Pin(A("c")).ok());
  Result<uint64_t> r = pool.Put(A("d"), Blocks("d", 1), false);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(pool.Contains(A("d")));
  EXPECT_EQ(pool.Stats().n_pinned_agents, 2u);
  EXPECT_EQ(pool.Erase(A("a")).code(), StatusCode::kFailedPrecondition);
  pool.Unpin(A("a"));
  EXPECT_TRUE(pool.Put(A("d"), Blocks("d", 1), false).ok());  // now a can go
  EXPECT_FALSE(pool.Contains(A("a")));
  EXPECT_EQ(pool.Pin(A("zz")).code(), StatusCode::kNotFound);
}

TEST(BlockPoolTest, TooLargeFailsWithoutEvicting) {
  BlockPool pool(Options(3));
  ASSERT_TRUE(pool.Put(A("a"), Blocks("a", 2), false).ok());
  EXPECT_EQ(pool.Put(A("big"), Blocks("big", 4), false).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(pool.Contains(A("a")));
  EXPECT_EQ(pool.Stats().evictions, 0u);
}

// Dirty means "not on disk yet": never dropped, whatever the pressure, until
// the saver marks the generation it wrote clean.
TEST(BlockPoolTest, DirtyAgentsAreNotEvictedUntilMarkedClean) {
  std::vector<EvictionEvent> events;
  BlockPoolOptions o = Options(2);
  o.on_evict = [&](const EvictionEvent& e) { events.push_back(e); };
  BlockPool pool(o);
  ASSERT_TRUE(pool.Put(A("a"), Blocks("a", 1)).ok());  // dirty, and the LRU
  ASSERT_TRUE(pool.Put(A("b"), Blocks("b", 1), false).ok());
  ASSERT_TRUE(pool.Put(A("c"), Blocks("c", 1)).ok());  // evicts b, not a
  EXPECT_TRUE(pool.Contains(A("a")));
  EXPECT_FALSE(pool.Contains(A("b")));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].agent.agent_id, "b");
  EXPECT_EQ(events[0].freed_bytes, kCharge);
  Result<uint64_t> r = pool.Put(A("d"), Blocks("d", 1));  // a and c dirty: nothing to drop
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(pool.Contains(A("d")));
  EXPECT_EQ(pool.Stats().n_dirty_agents, 2u);
  ASSERT_TRUE(pool.MarkClean(A("a"), pool.Info(A("a"))->generation));  // its save landed
  EXPECT_TRUE(pool.Put(A("d"), Blocks("d", 1)).ok());
  EXPECT_FALSE(pool.Contains(A("a")));
  EXPECT_TRUE(pool.Contains(A("c")));
}

TEST(BlockPoolTest, SharedBlocksCountedOnce) {
  BlockPool pool(Options(100));
  std::vector<PoolBlock> prefix = Blocks("sys", 3);
  for (int i = 0; i < 10; ++i) {
    std::vector<PoolBlock> blocks = prefix;
    // Same ids, other bytes: the stored copy wins (ids are content addresses).
    if (i > 0) for (auto& b : blocks) b.block = MakeBlock(b.block->index, 9);
    const std::string own = "own" + std::to_string(i);
    blocks.push_back({own, MakeBlock(3, 2)});
    ASSERT_TRUE(pool.Put(A("agent" + std::to_string(i)), blocks).ok());
  }
  BlockPoolStats s = pool.Stats();
  EXPECT_EQ(s.n_blocks, 13u);
  EXPECT_EQ(s.used_bytes, 13 * kCharge);
  Result<AgentSnapshot> snap = pool.Get(A("agent7"));
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->blocks[0].block.get(), prefix[0].block.get());
  EXPECT_EQ(pool.Info(A("agent7"))->bytes, 4 * kCharge);
  EXPECT_EQ(pool.Info(A("agent7"))->shared_bytes, 3 * kCharge) << "the 3 prefix blocks, not its own";
  EXPECT_EQ(pool.Info(A("agent7"))->n_tokens, 4 * kBlockTokens);
}

TEST(BlockPoolTest, EraseOfOneSharingAgentKeepsOthers) {
  BlockPool pool(Options(100));
  std::vector<PoolBlock> prefix = Blocks("sys", 3);
  for (const char* id : {"a", "b"}) {
    std::vector<PoolBlock> blocks = prefix;
    blocks.push_back({std::string("own-") + id, MakeBlock(3, 5)});
    ASSERT_TRUE(pool.Put(A(id), blocks).ok());
  }
  EXPECT_EQ(pool.Stats().used_bytes, 5 * kCharge);
  ASSERT_TRUE(pool.Erase(A("a")).ok());
  EXPECT_EQ(pool.Erase(A("a")).code(), StatusCode::kNotFound);
  EXPECT_EQ(pool.Stats().used_bytes, 4 * kCharge);
  Result<AgentSnapshot> b = pool.Get(A("b"));
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->blocks.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*b->blocks[i].block, *prefix[i].block);
  ASSERT_TRUE(pool.Erase(A("b")).ok());
  EXPECT_EQ(pool.Stats().used_bytes, 0u);
  EXPECT_EQ(pool.Stats().n_blocks, 0u);
}

TEST(BlockPoolTest, PutReplacesBlockList) {
  BlockPool pool(Options(5));
  ASSERT_TRUE(pool.Put(A("a"), Blocks("x", 3)).ok());
  // Next turn: same first two blocks, last (partial) block rewritten, one new.
  std::vector<PoolBlock> next = Blocks("x", 2);
  next.push_back({"x2'", MakeBlock(2, 7)});
  next.push_back({"x3", MakeBlock(3, 7)});
  ASSERT_TRUE(pool.Put(A("a"), next).ok());
  EXPECT_EQ(pool.Stats().n_blocks, 4u);
  EXPECT_EQ(pool.Stats().used_bytes, 4 * kCharge);
  // Growing within the budget by replacing one's own blocks never evicts oneself.
  ASSERT_TRUE(pool.Put(A("a"), Blocks("y", 5)).ok());
  EXPECT_EQ(pool.Stats().used_bytes, 5 * kCharge);
  EXPECT_EQ(pool.Put(A("a"), Blocks("a", 1, 0)).ok(), true);
  std::vector<PoolBlock> dup = Blocks("z", 1);
  dup.push_back(dup[0]);
  EXPECT_EQ(pool.Put(A("a"), dup).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool.Put(A(""), Blocks("z", 1)).status().code(), StatusCode::kInvalidArgument);
}

TEST(BlockPoolTest, NamespacesIsolated) {
  BlockPool pool(Options(100));
  ASSERT_TRUE(pool.Put(A("same", "t1"), Blocks("sys", 2, 1)).ok());
  ASSERT_TRUE(pool.Put(A("same", "t2"), Blocks("sys", 2, 2)).ok());
  EXPECT_EQ(pool.Stats().n_blocks, 4u);  // same ids, but never shared across namespaces
  EXPECT_EQ(pool.Get(A("same", "t1"))->blocks[0].block->tensors[0].data[0], 1);
  EXPECT_EQ(pool.Get(A("same", "t2"))->blocks[0].block->tensors[0].data[0], 2);
  EXPECT_EQ(pool.ListAgents("t1").size(), 1u);
  EXPECT_EQ(pool.ListAgents("t3").size(), 0u);
  ASSERT_TRUE(pool.Erase(A("same", "t1")).ok());
  EXPECT_TRUE(pool.Contains(A("same", "t2")));
  EXPECT_EQ(pool.Stats().n_blocks, 2u);
}

TEST(BlockPoolTest, MarkCleanChecksVersion) {
  BlockPool pool(Options(10));
  Result<uint64_t> v1 = pool.Put(A("a"), Blocks("a", 1));
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(pool.Stats().n_dirty_agents, 1u);
  Result<uint64_t> v2 = pool.Put(A("a"), Blocks("a", 2));  // a save of v1 races with turn 2
  ASSERT_TRUE(v2.ok());
  EXPECT_FALSE(pool.MarkClean(A("a"), *v1));
  EXPECT_TRUE(pool.Info(A("a"))->dirty);
  EXPECT_TRUE(pool.MarkClean(A("a"), *v2));
  EXPECT_FALSE(pool.Get(A("a"))->dirty);
  EXPECT_FALSE(pool.MarkClean(A("nobody"), *v2));
}

TEST(BlockPoolTest, EvictToDisk) {
  BlockPool pool(Options(10));
  ASSERT_TRUE(pool.Put(A("a"), Blocks("a", 2)).ok());
  ASSERT_TRUE(pool.Put(A("clean"), Blocks("c", 1), false).ok());
  EXPECT_EQ(pool.EvictToDisk(A("a")).code(), StatusCode::kFailedPrecondition);  // not saved yet
  EXPECT_TRUE(pool.Contains(A("a")));
  ASSERT_TRUE(pool.MarkClean(A("a"), pool.Info(A("a"))->generation));
  ASSERT_TRUE(pool.Pin(A("a")).ok());
  EXPECT_EQ(pool.EvictToDisk(A("a")).code(), StatusCode::kFailedPrecondition);
  pool.Unpin(A("a"));
  EXPECT_TRUE(pool.EvictToDisk(A("a")).ok());
  EXPECT_FALSE(pool.Contains(A("a")));
  EXPECT_TRUE(pool.EvictToDisk(A("clean")).ok());
  EXPECT_EQ(pool.EvictToDisk(A("clean")).code(), StatusCode::kNotFound);
  EXPECT_EQ(pool.Stats().used_bytes, 0u);
  EXPECT_EQ(pool.Stats().evictions, 2u);
}

// Two threads (inference-like and I/O-like) hammer the pool; run under TSan too.
TEST(BlockPoolTest, ConcurrencySmoke) {
  BlockPool pool(Options(12));
  std::atomic<bool> over_budget{false};
  auto worker = [&](int seed) {
    std::mt19937 rng(seed);
    for (int i = 0; i < 3000; ++i) {
      const AgentKey key = A("agent" + std::to_string(rng() % 8), (rng() % 2) ? "t1" : "t2");
      switch (rng() % 7) {
        case 0:
        case 1: {
          std::vector<PoolBlock> blocks = Blocks("sys", 1);  // shared prefix block
          auto own = Blocks(key.agent_id + "-" + std::to_string(rng() % 3) + "-", 1 + rng() % 2);
          blocks.insert(blocks.end(), own.begin(), own.end());
          (void)pool.Put(key, blocks, rng() % 2);
          break;
        }
        case 2: {
          Result<AgentSnapshot> s = pool.Get(key);
          if (s.ok() && s->dirty && rng() % 2) pool.MarkClean(key, s->generation);  // "saved"
          break;
        }
        case 3:
          if (pool.Pin(key).ok()) {
            (void)pool.Get(key);
            pool.Unpin(key);
          }
          break;
        case 4: (void)pool.EvictToDisk(key); break;
        case 5: (void)pool.Erase(key); break;
        case 6: (void)pool.ListAgents(key.ns); break;
      }
      BlockPoolStats s = pool.Stats();
      if (s.used_bytes > s.budget_bytes || s.used_bytes != s.n_blocks * kCharge) over_budget = true;
    }
  };
  std::thread t1(worker, 1), t2(worker, 2);
  t1.join();
  t2.join();
  EXPECT_FALSE(over_budget);
  BlockPoolStats s = pool.Stats();
  EXPECT_EQ(s.n_pinned_agents, 0u);
  size_t listed = pool.ListAgents("t1").size() + pool.ListAgents("t2").size();
  EXPECT_EQ(listed, s.n_agents);
}

}  // namespace
}  // namespace agentkv
