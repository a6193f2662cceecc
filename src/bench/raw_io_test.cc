#include "bench/raw_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

namespace agentkv::bench {
namespace {

class RawIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("agentkv_raw_io_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(RawIoTest, WriteReadRoundTripAndResidency) {
  const std::string path = (dir_ / "f.bin").string();
  std::vector<uint8_t> data(3 << 20, 0x5a);
  ASSERT_TRUE(WriteFileSynced(path, data).ok());
  auto n = ReadFileSequential(path, 4096);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, data.size());
  auto before = ResidentFraction(path);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_GE(*before, 0.0);
  EXPECT_LE(*before, 1.0);
  // Whether the kernel drops the pages depends on the file system (tmpfs
  // never does), so only the call itself is checked.
  EXPECT_TRUE(DropFromPageCache(path).ok());
}

TEST_F(RawIoTest, ErrorsNameThePath) {
  const std::string missing = (dir_ / "missing").string();
  auto r = ReadFileSequential(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIOError);
  EXPECT_NE(r.status().message().find(missing), std::string::npos);
  EXPECT_FALSE(DropFromPageCache(missing).ok());
  EXPECT_FALSE(WriteFileSynced((dir_ / "no/such/dir").string(), {}).ok());
}

}  // namespace
}  // namespace agentkv::bench
