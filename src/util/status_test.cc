#include "util/status.h"

#include <gtest/gtest.h>

#include "util/hash.h"

namespace agentkv {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("half: odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  AGENTKV_ASSIGN_OR_RETURN(int h, Half(x));
  AGENTKV_ASSIGN_OR_RETURN(int q, Half(h));
  *out = q;
  return Status::OK();
}

TEST(StatusTest, ResultPropagates) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "InvalidArgument: half: odd");
  EXPECT_EQ(s.WithContext("q").message(), "q: half: odd");
}

TEST(StatusTest, QuantityTravelsWithContext) {
  EXPECT_FALSE(Status::OutOfRange("long").quantity().has_value());
  const Status s = Status::OutOfRange("long").WithQuantity({3000, 2048}).WithContext("submit");
  ASSERT_TRUE(s.quantity().has_value());
  EXPECT_EQ(s.quantity()->amount, 3000);
  EXPECT_EQ(s.quantity()->limit, 2048);
  EXPECT_EQ(s.message(), "submit: long");
}

TEST(HashTest, KnownValues) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hex64(0x1234), "0000000000001234");
  Xxh3Stream s;
  s.Update("ab", 2);
  s.Update("c", 1);
  EXPECT_EQ(s.Digest(), Xxh3_64("abc"));
  EXPECT_NE(Xxh3_64("abc"), Xxh3_64("abd"));
}

}  // namespace
}  // namespace agentkv
