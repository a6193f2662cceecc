// Crash and I/O-error injection at every file-system operation of a save, a
// delete and an open: after reopening, each agent is at its old or its new
// version (never a mix) and loads completely; an OK save is durable.

#include <gtest/gtest.h>

#include <set>

#include "store/agent_store.h"
#include "store/fault_file_system.h"
#include "store/mem_file_system.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT

constexpr uint64_t kMaxOps = 400;

struct World {
  MemFileSystem mem;
  FaultInjectingFileSystem fault{&mem};
  std::unique_ptr<AgentStore> store;
  int64_t clock = 1000;

  void Open() {
    AgentStoreOptions o = Options(&fault);
    o.now_ms = [this] { return ++clock; };
    auto s = AgentStore::Open(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store = std::move(s).value();
  }
  // Open, agents "a" (V1) and "b" (Other) saved, the fault's op count reset:
  // where the update, delete and I/O-error tests start.
  void OpenWithAAndB();
  // Crash: the store dies, unsynced state is dropped, a new store opens.
  void CrashAndReopen() {
    store.reset();
    mem.SimulateCrash();
    fault.Reset();
    Open();
  }
  // No temp files and no block file that no manifest names.
  void ExpectClean() {
    std::set<std::string> referenced;
    for (const auto& ns : store->ListNamespaces()) {
      auto agents = store->ListAgents(ns);
      ASSERT_TRUE(agents.ok());
      for (const auto& a : *agents) {
        auto rec = store->GetRecord(ns, a.agent_id);
        ASSERT_TRUE(rec.ok()) << rec.status().ToString();
        for (const auto& b : rec->blocks) referenced.insert(b.id);
      }
    }
    size_t blocks = 0;
    for (const auto& p : mem.AllFiles()) {
      EXPECT_EQ(p.find(".tmp"), std::string::npos) << p;
      if (p.find("/blocks/") != std::string::npos) ++blocks;
    }
    EXPECT_EQ(blocks, referenced.size());
  }
};

const std::vector<int32_t>& V1() {
  static const auto* v = new std::vector<int32_t>(MakeTokens(600, 1, 512));
  return *v;
}
const std::vector<int32_t>& V2() {  // V1 + 300 tokens: block 2 fills, block 3 starts
  static const auto* v = [] {
    auto* t = new std::vector<int32_t>(V1());
    for (int i = 0; i < 300; ++i) t->push_back(7 + i);
    return t;
  }();
  return *v;
}
const std::vector<int32_t>& Other() {  // shares blocks 0 and 1 with V1
  static const auto* v = new std::vector<int32_t>(MakeTokens(530, 2, 512));
  return *v;
}

void World::OpenWithAAndB() {
  Open();
  ASSERT_TRUE(Save(store.get(), "ns", "a", V1()).ok());
  ASSERT_TRUE(Save(store.get(), "ns", "b", Other()).ok());
  fault.Reset();
}

// Old or new, complete; returns true if new.
bool ExpectOldOrNew(AgentStore* store, const std::vector<int32_t>* old_tokens, const std::vector<int32_t>& new_tokens,
                    uint64_t n) {
  auto rec = store->GetRecord("ns", "a");
  if (old_tokens == nullptr && rec.status().code() == StatusCode::kNotFound) return false;
  EXPECT_TRUE(rec.ok()) << "op " << n << ": " << rec.status().ToString();
  if (!rec.ok()) return false;
  bool is_new = rec->tokens == new_tokens;
  EXPECT_TRUE(is_new || (old_tokens && rec->tokens == *old_tokens)) << "op " << n << ": a mix";
  EXPECT_TRUE(LoadsExactly(store, "ns", "a", rec->tokens)) << "op " << n << ": incomplete";
  return is_new;
}

TEST(CrashTest, CrashAtEveryStepOfAnUpdate) {
  uint64_t n = 1;
  for (; n < kMaxOps; ++n) {
    World w;
    w.OpenWithAAndB();
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    w.fault.CrashAtOp(n);
    Status st = Save(w.store.get(), "ns", "a", V2());
    bool crashed = w.fault.crashed();
    w.CrashAndReopen();
    bool is_new = ExpectOldOrNew(w.store.get(), &V1(), V2(), n);
    if (st.ok()) EXPECT_TRUE(is_new) << "op " << n << ": an acknowledged save was lost";
    EXPECT_TRUE(LoadsExactly(w.store.get(), "ns", "b", Other())) << "op " << n;
    w.ExpectClean();
    if (!crashed) break;
  }
  EXPECT_GT(n, 10u);
  EXPECT_LT(n, kMaxOps);
}

TEST(CrashTest, CrashAtEveryStepOfAFirstSave) {
  uint64_t n = 1;
  for (; n < kMaxOps; ++n) {
    World w;
    w.fault.CrashAtOp(n);  // also covers the creation of the directories
    AgentStoreOptions o = Options(&w.fault);
    auto s = AgentStore::Open(o);
    Status st = s.ok() ? Save(s->get(), "ns", "a", V2()) : s.status();
    bool crashed = w.fault.crashed();
    if (s.ok()) s->reset();
    w.CrashAndReopen();
    bool is_new = ExpectOldOrNew(w.store.get(), nullptr, V2(), n);
    if (st.ok()) EXPECT_TRUE(is_new) << "op " << n;
    w.ExpectClean();
    if (!crashed) break;
  }
  EXPECT_LT(n, kMaxOps);
}

TEST(CrashTest, CrashAtEveryStepOfADelete) {
  uint64_t n = 1;
  for (; n < kMaxOps; ++n) {
    World w;
    w.OpenWithAAndB();
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    w.fault.CrashAtOp(n);
    Status st = w.store->DeleteAgent("ns", "a");
    bool crashed = w.fault.crashed();
    w.CrashAndReopen();
    auto rec = w.store->GetRecord("ns", "a");
    if (st.ok()) EXPECT_EQ(rec.status().code(), StatusCode::kNotFound) << "op " << n;
    if (rec.ok()) EXPECT_TRUE(LoadsExactly(w.store.get(), "ns", "a", V1())) << "op " << n;
    EXPECT_TRUE(LoadsExactly(w.store.get(), "ns", "b", Other())) << "op " << n;
    w.ExpectClean();
    if (!crashed) break;
  }
  EXPECT_LT(n, kMaxOps);
}

// A transient I/O error at op n: the same store keeps a consistent view, a
// retry succeeds, and the retried version survives a crash.
TEST(CrashTest, IoErrorAtEveryStepThenRetry) {
  uint64_t n = 1;
  for (; n < kMaxOps; ++n) {
    World w;
    w.OpenWithAAndB();
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    w.fault.FailOpAt(n);
    Status st = Save(w.store.get(), "ns", "a", V2());
    bool failed_op_reached = w.fault.op_count() >= n;
    w.fault.Reset();  // disarm: the checks below must not hit the fault
    ExpectOldOrNew(w.store.get(), &V1(), V2(), n);
    EXPECT_TRUE(LoadsExactly(w.store.get(), "ns", "b", Other())) << "op " << n;
    ASSERT_TRUE(Save(w.store.get(), "ns", "a", V2()).ok()) << "op " << n;
    w.CrashAndReopen();
    EXPECT_TRUE(ExpectOldOrNew(w.store.get(), &V1(), V2(), n)) << "op " << n;
    EXPECT_TRUE(LoadsExactly(w.store.get(), "ns", "b", Other())) << "op " << n;
    w.ExpectClean();
    if (!failed_op_reached) {
      EXPECT_TRUE(st.ok());
      break;
    }
  }
  EXPECT_LT(n, kMaxOps);
}

// Same for a first save into a new namespace: directories created by a
// failed attempt must still be made durable by the retry.
TEST(CrashTest, IoErrorAtEveryStepOfAFirstSaveThenRetry) {
  uint64_t n = 1;
  for (; n < kMaxOps; ++n) {
    World w;
    w.Open();
    w.fault.Reset();
    w.fault.FailOpAt(n);
    Status st = Save(w.store.get(), "ns", "a", V2());
    bool failed_op_reached = w.fault.op_count() >= n;
    w.fault.Reset();
    ExpectOldOrNew(w.store.get(), nullptr, V2(), n);
    ASSERT_TRUE(Save(w.store.get(), "ns", "a", V2()).ok()) << "op " << n;
    w.CrashAndReopen();
    EXPECT_TRUE(ExpectOldOrNew(w.store.get(), nullptr, V2(), n)) << "op " << n << ": acknowledged save lost";
    w.ExpectClean();
    if (!failed_op_reached) {
      EXPECT_TRUE(st.ok());
      break;
    }
  }
  EXPECT_LT(n, kMaxOps);
}

// The disk fills up during the update: with less room than the save writes
// it must fail with ENOSPC and leave the old version; with exactly enough it
// succeeds. `need` (block files + manifest) is measured on an unlimited disk.
TEST(CrashTest, NoSpaceLeavesOldVersion) {
  uint64_t need = 0;
  {
    World w;
    w.Open();
    ASSERT_TRUE(Save(w.store.get(), "ns", "a", V1()).ok());
    auto res = w.store->SaveAgent("ns", MakeRecord("a", V2()), ProviderFor(V2()));
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    need = res->bytes_written;
  }
  ASSERT_GT(need, 10000u);
  for (uint64_t room : {uint64_t{0}, uint64_t{100}, uint64_t{5000}, need / 2, need - 1, need}) {
    World w;
    w.Open();
    ASSERT_TRUE(Save(w.store.get(), "ns", "a", V1()).ok());
    w.fault.Reset();
    w.fault.SetNoSpaceAfterBytes(room);
    Status st = Save(w.store.get(), "ns", "a", V2());
    if (room < need) {
      ASSERT_FALSE(st.ok()) << "room " << room << " of " << need << ": the save cannot have fit";
      EXPECT_EQ(st.code(), StatusCode::kIOError);
      EXPECT_NE(st.message().find("No space"), std::string::npos) << st.ToString();
    } else {
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    EXPECT_EQ(ExpectOldOrNew(w.store.get(), &V1(), V2(), room), st.ok()) << "room " << room;
    w.CrashAndReopen();
    EXPECT_EQ(ExpectOldOrNew(w.store.get(), &V1(), V2(), room), st.ok()) << "room " << room;
    w.ExpectClean();
  }
}

// Open itself deletes and moves files; a crash in the middle of that is safe.
TEST(CrashTest, CrashAtEveryStepOfOpenRecovery) {
  uint64_t n = 1;
  for (; n < kMaxOps; ++n) {
    World w;
    w.Open();
    ASSERT_TRUE(Save(w.store.get(), "ns", "a", V1()).ok());
    ASSERT_TRUE(Save(w.store.get(), "ns", "b", Other()).ok());
    // Leave debris: an unfinished save (temp file, orphan blocks).
    w.fault.CrashAtOp(40);
    (void)Save(w.store.get(), "ns", "c", MakeTokens(900, 9));
    w.store.reset();
    w.fault.Reset();
    w.fault.CrashAtOp(n);
    auto s = AgentStore::Open(Options(&w.fault));
    bool crashed = w.fault.crashed();
    s = Status::Internal("drop");
    w.CrashAndReopen();
    EXPECT_TRUE(LoadsExactly(w.store.get(), "ns", "a", V1())) << "op " << n;
    EXPECT_TRUE(LoadsExactly(w.store.get(), "ns", "b", Other())) << "op " << n;
    w.ExpectClean();
    if (!crashed) break;
  }
  EXPECT_LT(n, kMaxOps);
}

}  // namespace
}  // namespace agentkv
