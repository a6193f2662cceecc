// FileRemovals::Run: every queued file removed, each directory to fsync
// synced once after its removals; a file already gone is no failure and not
// counted; a failed removal or erasure fsync is reported with its namespace.
#include "store/file_removals.h"

#include <gtest/gtest.h>

#include "store/fault_file_system.h"
#include "store/mem_file_system.h"

namespace agentkv {
namespace {

void Write(FileSystem* fs, const std::string& path) {
  auto f = fs->NewWritableFile(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("x").ok());
  ASSERT_TRUE((*f)->Close().ok());
}

TEST(FileRemovalsTest, RemovesQueuedFilesAndSyncsEachDirectoryOnce) {
  MemFileSystem mem;
  FaultInjectingFileSystem fs(&mem);
  ASSERT_TRUE(fs.CreateDirs("/c/ns/blocks").ok());
  Write(&fs, "/c/ns/blocks/a");
  Write(&fs, "/c/ns/blocks/b");
  Write(&fs, "/c/ns/agents.json");
  FileRemovals q;
  EXPECT_TRUE(q.empty());
  q.Add({"ns", "/c/ns/blocks/a", "/c/ns/blocks", true});
  q.Add({"ns", "/c/ns/blocks/b", "/c/ns/blocks", true});
  q.Add({"ns", "/c/ns/blocks/gone", "/c/ns/blocks", true});  // a rescan took it first
  q.Add({"ns", "/c/ns/agents.json", "", false});
  const std::vector<FileRemovals::Removal> taken = q.Take();
  EXPECT_TRUE(q.empty());
  fs.Reset();
  const FileRemovals::Outcome out = FileRemovals::Run(&fs, taken);
  EXPECT_EQ(out.blocks_removed, 2u);
  EXPECT_TRUE(out.failures.empty());
  EXPECT_FALSE(mem.Exists("/c/ns/blocks/a"));
  EXPECT_FALSE(mem.Exists("/c/ns/blocks/b"));
  EXPECT_FALSE(mem.Exists("/c/ns/agents.json"));
  EXPECT_EQ(fs.CountOps("syncdir", "/c/ns/blocks"), 1u);
  const std::vector<std::string> log = fs.log();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back().rfind("syncdir", 0), 0u) << "the fsync comes after the removals";
}

TEST(FileRemovalsTest, AFailedRemovalOrErasureFsyncIsReportedWithItsNamespace) {
  MemFileSystem mem;
  FaultInjectingFileSystem fs(&mem);
  ASSERT_TRUE(fs.CreateDirs("/c/ns1/blocks").ok());
  ASSERT_TRUE(fs.CreateDirs("/c/ns2/blocks").ok());
  Write(&fs, "/c/ns1/blocks/a");
  Write(&fs, "/c/ns2/blocks/b");
  const std::vector<FileRemovals::Removal> removals = {{"ns1", "/c/ns1/blocks/a", "", true},
                                                       {"ns2", "/c/ns2/blocks/b", "/c/ns2/blocks", true}};
  fs.FailOps("remove", "/c/ns1/");
  FileRemovals::Outcome out = FileRemovals::Run(&fs, removals);
  ASSERT_EQ(out.failures.size(), 1u);
  EXPECT_EQ(out.failures[0].ns, "ns1");
  EXPECT_EQ(out.failures[0].path, "/c/ns1/blocks/a");
  EXPECT_FALSE(out.failures[0].durable);
  EXPECT_FALSE(out.failures[0].status.ok());
  EXPECT_EQ(out.blocks_removed, 1u);
  EXPECT_TRUE(mem.Exists("/c/ns1/blocks/a"));

  fs.FailOps("syncdir", "/c/ns2/");  // the erasure's fsync fails: not durable, so a failure
  Write(&fs, "/c/ns2/blocks/b");
  out = FileRemovals::Run(&fs, removals);
  ASSERT_EQ(out.failures.size(), 1u);
  EXPECT_EQ(out.failures[0].ns, "ns2");
  EXPECT_TRUE(out.failures[0].durable);
  EXPECT_EQ(out.blocks_removed, 1u);  // ns1's file went this time
}

}  // namespace
}  // namespace agentkv
