// ReplyEmitter: stop strings and what is held back (plain replies; the
// reply parser's deltas are covered by scheduler_tools_test.cc).
#include "sched/reply_emitter.h"

#include <gtest/gtest.h>

#include "sched/test_sink.h"

namespace agentkv::sched {
namespace {

TEST(ReplyEmitterTest, WithoutStopsEveryPieceGoesOutAtOnce) {
  testing::RecordingSink sink;
  const std::vector<std::string> stops;
  ReplyEmitter e(sink, stops, nullptr);
  EXPECT_FALSE(e.Append("Hel"));
  EXPECT_EQ(sink.text(), "Hel");
  EXPECT_FALSE(e.Append("lo"));
  EXPECT_EQ(sink.text(), "Hello");
  EXPECT_EQ(e.Finish(api::FinishReason::kStop), api::FinishReason::kStop);
  EXPECT_EQ(sink.text(), "Hello");
  EXPECT_EQ(e.stop_sequence(), "");
}

TEST(ReplyEmitterTest, HoldsBackTheLastBytesThatCouldStartAStop) {
  testing::RecordingSink sink;
  const std::vector<std::string> stops{"END"};
  ReplyEmitter e(sink, stops, nullptr);
  EXPECT_FALSE(e.Append("abcE"));
  EXPECT_EQ(sink.text(), "ab");  // the last len("END") - 1 bytes could begin it
  EXPECT_EQ(e.emitted(), 2u);
  EXPECT_FALSE(e.Append("x"));
  EXPECT_EQ(sink.text(), "abc");
  EXPECT_EQ(e.Finish(api::FinishReason::kLength), api::FinishReason::kLength);
  EXPECT_EQ(sink.text(), "abcEx");  // the held-back rest goes out at the end
  EXPECT_EQ(e.emitted(), e.text().size());
}

TEST(ReplyEmitterTest, AStopAcrossPiecesCutsTheReplyBeforeTheEarliestStop) {
  testing::RecordingSink sink;
  const std::vector<std::string> stops{"STOP", "ST"};
  ReplyEmitter e(sink, stops, nullptr);
  EXPECT_FALSE(e.Append("one S"));
  EXPECT_TRUE(e.Append("TOP two"));
  EXPECT_EQ(e.text(), "one ");
  EXPECT_EQ(e.stop_sequence(), "STOP");  // both start at the same byte: the first listed
  e.Finish(api::FinishReason::kStop);
  EXPECT_EQ(sink.text(), "one ");  // never any byte of the stop string
}

}  // namespace
}  // namespace agentkv::sched
