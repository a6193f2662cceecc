// AgentStore's lock is never held across a load's file I/O: with the load's
// reads held at a gated file system, the index accessors (what /metrics and
// the admin calls use) and a save of another agent answer; the held load
// then completes. No wall-time assertion: a call that waited for the gate
// would still be waiting when the test gives up on it (10 s) and opens it.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "store/agent_store.h"
#include "store/gated_file_system_test_util.h"
#include "store/mem_file_system.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT

constexpr auto kGiveUp = std::chrono::seconds(10);

// Waits until something is held at the gate (the load reached it).
bool WaitHeld(GatedFileSystem& fs) {
  for (int i = 0; i < 1000 && fs.held() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return fs.held() > 0;
}

TEST(AgentStoreLockTest, IndexCallsAndSavesAnswerWhileALoadIsHeldAtTheDisk) {
  MemFileSystem mem;
  GatedFileSystem gated(&mem);
  auto opened = AgentStore::Open(Options(&gated));
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  AgentStore& store = **opened;
  const auto tokens = MakeTokens(600, 1);
  ASSERT_TRUE(Save(&store, "team", "a1", tokens).ok());
  int saved = 0;
  // Held at its block files, then at its manifest.
  for (const char* part : {"/blocks/", "/agents/"}) {
    SCOPED_TRACE(part);
    gated.Close(part, "");
    auto load = std::async(std::launch::async, [&] { return store.LoadBlocks("team", "a1"); });
    ASSERT_TRUE(WaitHeld(gated));
    auto calls = std::async(std::launch::async, [&] {
      const StoreStats stats = store.stats();
      auto list = store.ListAgents("team");
      auto summary = store.GetSummary("team", "a1");
      auto absent = store.GetSummary("team", "nobody");
      Status other = Save(&store, "team", "other" + std::to_string(saved++), MakeTokens(300, 2));
      return stats.agents >= 1 && list.ok() && !list->empty() && summary.ok() && summary->n_tokens == 600 &&
             absent.status().code() == StatusCode::kNotFound && other.ok() &&
             store.ListNamespaces() == std::vector<std::string>{"team"};
    });
    const bool answered = calls.wait_for(kGiveUp) == std::future_status::ready;
    EXPECT_TRUE(answered) << "the index calls waited for a load held at the disk";
    EXPECT_GT(gated.held(), 0) << "the load was held all along";
    gated.Open();
    EXPECT_TRUE(calls.get());
    auto loaded = load.get();
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_TRUE(loaded->complete);
    EXPECT_EQ(loaded->record.tokens, tokens);
  }
  EXPECT_TRUE(LoadsExactly(&store, "team", "a1", tokens));
}

}  // namespace
}  // namespace agentkv
