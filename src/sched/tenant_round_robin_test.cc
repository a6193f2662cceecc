#include "sched/tenant_round_robin.h"

#include <gtest/gtest.h>

namespace agentkv::sched {
namespace {

// Issue 29, finding 11: a tenant's backlog no longer goes first because it
// came first; the other tenant's request is tried right after the first
// tenant's oldest (or before it, when that tenant already runs a turn).
TEST(TenantRoundRobinTest, InterleavesTenantsInsteadOfFifo) {
  TenantRoundRobin rr;
  const std::vector<std::string_view> queue = {"a", "a", "a", "a", "b"};
  EXPECT_EQ(rr.Order(queue, {}), (std::vector<size_t>{0, 4, 1, 2, 3}));
  EXPECT_EQ(rr.Order(queue, {{"a", 1}}), (std::vector<size_t>{4, 0, 1, 2, 3}));
}

TEST(TenantRoundRobinTest, TiesGoToTheTenantAdmittedLeastRecently) {
  TenantRoundRobin rr;
  const std::vector<std::string_view> queue = {"a", "b", "a", "b"};
  rr.Order(queue, {});
  rr.Admitted("a");
  EXPECT_EQ(rr.Order(queue, {}), (std::vector<size_t>{1, 0, 3, 2}));
  rr.Admitted("b");
  EXPECT_EQ(rr.Order(queue, {}), (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(TenantRoundRobinTest, KeepsEachTenantsOwnOrder) {
  TenantRoundRobin rr;
  const std::vector<std::string_view> queue = {"b", "a", "b", "c", "a", "b"};
  const std::vector<size_t> order = rr.Order(queue, {{"c", 3}});
  std::vector<size_t> of_b;
  for (size_t i : order) {
    if (queue[i] == "b") of_b.push_back(i);
  }
  EXPECT_EQ(of_b, (std::vector<size_t>{0, 2, 5}));
  EXPECT_EQ(order.back(), 3u);  // c holds three slots: its request goes last
}

TEST(TenantRoundRobinTest, ForgetsTenantsNeitherQueuedNorRunning) {
  TenantRoundRobin rr;
  rr.Order({"a", "b"}, {});
  rr.Admitted("a");
  rr.Order({"b"}, {});                                               // a is gone: its last admission no longer counts
  EXPECT_EQ(rr.Order({"a", "b"}, {}), (std::vector<size_t>{0, 1}));  // a tie: queue order
}

}  // namespace
}  // namespace agentkv::sched
