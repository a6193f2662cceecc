#include "sched/slot_owners.h"

#include <gtest/gtest.h>

#include <vector>

namespace agentkv::sched {
namespace {

Agent Make(const std::string& id, int64_t last_use_ms = 0) {
  Agent a;
  a.key = {"ns", id};
  a.last_use_ms = last_use_ms;
  return a;
}

TEST(SlotOwnersTest, SetMovesTheAgentsSlotAndResidency) {
  SlotOwners slots(2);
  Agent a = Make("a"), b = Make("b");
  slots.Set(1, &a);
  EXPECT_EQ(a.slot, 1);
  EXPECT_EQ(slots.owner(1), &a);
  EXPECT_TRUE(slots.IsResident(a.key));
  EXPECT_FALSE(slots.IsResident(b.key));
  slots.Set(1, &b);  // b takes a's slot
  EXPECT_EQ(a.slot, -1);
  EXPECT_EQ(b.slot, 1);
  EXPECT_FALSE(slots.IsResident(a.key));
  EXPECT_TRUE(slots.IsResident(b.key));
  slots.Set(1, nullptr);
  EXPECT_EQ(b.slot, -1);
  EXPECT_FALSE(slots.IsResident(b.key));
  EXPECT_FALSE(slots.IsResident({"ns", ""}));  // a free slot's empty key is nobody's
}

TEST(SlotOwnersTest, FreeSkipsOwnedAndUnusableSlots) {
  SlotOwners slots(3);
  Agent a = Make("a");
  slots.Set(0, &a);
  EXPECT_EQ(slots.Free([](int) { return true; }), 1);
  EXPECT_EQ(slots.Free([](int s) { return s != 1; }), 2);
  EXPECT_EQ(slots.Free([](int) { return false; }), -1);
}

TEST(SlotOwnersTest, VictimIsTheLeastRecentlyUsedIdleAgentAndNeverABusyOrFreeSlot) {
  SlotOwners slots(3);
  Agent old = Make("old", 10), young = Make("young", 20), busy = Make("busy", 1);
  busy.busy = true;
  slots.Set(0, &busy);
  slots.Set(1, &young);
  slots.Set(2, &old);
  const Agent newcomer = Make("new");
  EXPECT_EQ(slots.Victim(newcomer), 2);
  old.busy = true;
  EXPECT_EQ(slots.Victim(newcomer), 1);
  slots.Set(1, nullptr);  // a slot without owner (an import draining into it) is no victim
  EXPECT_EQ(slots.Victim(newcomer), -1);
}

TEST(SlotOwnersTest, AcquireGivesTheAgentsOwnSlotThenAFreeOneThenEvictsAVictim) {
  SlotOwners slots(2);
  Agent resident = Make("resident", 10), other = Make("other", 20);
  std::vector<int> evicted;
  auto evict = [&](int s) {
    EXPECT_NE(slots.owner(s), nullptr);  // called while the victim still holds it
    evicted.push_back(s);
  };
  slots.Set(1, &resident);
  EXPECT_EQ(slots.Acquire(resident, [](int) { return true; }, evict), 1);  // its own
  EXPECT_EQ(slots.Acquire(other, [](int) { return true; }, evict), 0);     // a free one
  EXPECT_TRUE(evicted.empty());
  // Slot 0 unusable (draining): the idle resident agent gives its slot up.
  EXPECT_EQ(slots.Acquire(other, [](int s) { return s != 0; }, evict), 1);
  EXPECT_EQ(evicted, std::vector<int>{1});
  EXPECT_EQ(resident.slot, -1);
  EXPECT_EQ(slots.owner(1), nullptr);
  // Nothing free and no idle owner: none.
  slots.Set(1, &other);
  other.busy = true;
  const Agent newcomer = Make("new");
  EXPECT_EQ(slots.Acquire(newcomer, [](int s) { return s != 0; }, evict), -1);
  EXPECT_EQ(evicted.size(), 1u);
}

TEST(SlotOwnersTest, GaugesCountResidentAgentsAndTheirTokens) {
  SlotOwners slots(2);
  Agent a = Make("a");
  a.seq.tokens = {1, 2, 3};
  slots.Set(0, &a);
  slots.UpdateGauges();
  EXPECT_EQ(slots.agents_gauge(), 1u);
  EXPECT_EQ(slots.tokens_gauge(), 3u);
}

}  // namespace
}  // namespace agentkv::sched
