#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "store/durable_io.h"
#include "store/fault_file_system.h"
#include "store/mem_file_system.h"
#include "store/posix_file_system.h"

namespace agentkv {
namespace {

Status WriteUnsynced(FileSystem* fs, const std::string& path, const std::string& data) {
  AGENTKV_ASSIGN_OR_RETURN(auto f, fs->NewWritableFile(path));
  AGENTKV_RETURN_IF_ERROR(f->Append(data));
  return f->Close();
}

std::vector<std::string> Names(FileSystem* fs, const std::string& dir) {
  std::vector<std::string> out;
  auto r = fs->ListDir(dir);
  if (r.ok()) {
    for (const auto& e : *r) out.push_back(e.name + (e.is_dir ? "/" : ""));
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PathTest, JoinParentBase) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
  EXPECT_EQ(ParentDir("/a/b/c"), "/a/b");
  EXPECT_EQ(ParentDir("/a"), "/");
  EXPECT_EQ(ParentDir("a"), "");
  EXPECT_EQ(BaseName("/a/b/c"), "c");
}

TEST(MemFileSystemTest, BasicOperations) {
  MemFileSystem fs;
  EXPECT_EQ(fs.NewWritableFile("/d/x").status().code(), StatusCode::kNotFound);  // no parent
  ASSERT_TRUE(fs.CreateDirs("/d/e").ok());
  ASSERT_TRUE(WriteUnsynced(&fs, "/d/x", "hello").ok());
  EXPECT_EQ(*fs.ReadFile("/d/x"), "hello");
  EXPECT_EQ(*fs.ReadRange("/d/x", 1, 3), "ell");
  EXPECT_EQ(*fs.ReadRange("/d/x", 9, 3), "");
  EXPECT_EQ(*fs.FileSize("/d/x"), 5u);
  EXPECT_EQ(Names(&fs, "/d"), (std::vector<std::string>{"e/", "x"}));
  ASSERT_TRUE(fs.RenameFile("/d/x", "/d/e/y").ok());
  EXPECT_FALSE(fs.Exists("/d/x"));
  EXPECT_EQ(fs.RemoveDir("/d/e").code(), StatusCode::kIOError);  // not empty
  ASSERT_TRUE(fs.RemoveFile("/d/e/y").ok());
  EXPECT_EQ(fs.RemoveFile("/d/e/y").code(), StatusCode::kNotFound);
  ASSERT_TRUE(fs.RemoveDir("/d/e").ok());
  EXPECT_EQ(fs.ListDir("/nope").status().code(), StatusCode::kNotFound);
}

TEST(MemFileSystemTest, CrashDropsUnsyncedDataAndEntries) {
  MemFileSystem fs;
  ASSERT_TRUE(fs.CreateDirs("/d").ok());
  ASSERT_TRUE(fs.SyncDir("/").ok());
  // Synced data, synced entry: survives.
  ASSERT_TRUE(WriteFileAtomically(&fs, "/d/a", "A1", /*sync_dir=*/true).ok());
  // Synced data, unsynced entry: lost.
  ASSERT_TRUE(WriteFileAtomically(&fs, "/d/b", "B1", /*sync_dir=*/false).ok());
  // Unsynced data in a synced entry: the bytes are lost.
  ASSERT_TRUE(WriteUnsynced(&fs, "/d/c", "C1").ok());
  ASSERT_TRUE(fs.SyncDir("/d").ok());
  ASSERT_TRUE(WriteUnsynced(&fs, "/d/c2", "x").ok());
  // An unsynced rename over a durable file and an unsynced removal: undone.
  ASSERT_TRUE(WriteFileAtomically(&fs, "/d/a", "A2", /*sync_dir=*/false).ok());
  ASSERT_TRUE(fs.RemoveFile("/d/b").ok());
  fs.SimulateCrash();
  EXPECT_EQ(*fs.ReadFile("/d/a"), "A1");
  EXPECT_EQ(*fs.ReadFile("/d/b"), "B1");  // its creation had been synced by SyncDir("/d")
  EXPECT_EQ(*fs.ReadFile("/d/c"), "");
  EXPECT_FALSE(fs.Exists("/d/c2"));
  EXPECT_FALSE(fs.Exists("/d/a.tmp"));
}

TEST(MemFileSystemTest, EntriesInUnsyncedDirectoriesAreLost) {
  MemFileSystem fs;
  ASSERT_TRUE(fs.CreateDirs("/x/y").ok());
  ASSERT_TRUE(WriteFileAtomically(&fs, "/x/y/f", "data", /*sync_dir=*/true).ok());
  fs.SimulateCrash();  // "/x" itself never synced into "/"
  EXPECT_FALSE(fs.Exists("/x"));
  ASSERT_TRUE(CreateDirsDurably(&fs, "/x/y", "/").ok());
  ASSERT_TRUE(WriteFileAtomically(&fs, "/x/y/f", "data", /*sync_dir=*/true).ok());
  fs.SimulateCrash();
  EXPECT_EQ(*fs.ReadFile("/x/y/f"), "data");
}

TEST(FaultFileSystemTest, CountsFailsAndCrashes) {
  MemFileSystem mem;
  FaultInjectingFileSystem fs(&mem);
  ASSERT_TRUE(CreateDirsDurably(&fs, "/d", "/").ok());
  EXPECT_EQ(fs.log(), (std::vector<std::string>{"mkdir /d", "syncdir /"}));
  fs.Reset();
  ASSERT_TRUE(WriteFileAtomically(&fs, "/d/a", "x", true).ok());
  // create, append, sync, close, rename, syncdir
  EXPECT_EQ(fs.op_count(), 6u);
  EXPECT_EQ(fs.CountOps("create", "/d/a"), 1u);
  fs.Reset();
  fs.FailOpAt(2);  // the append
  EXPECT_EQ(WriteFileAtomically(&fs, "/d/a", "y", true).code(), StatusCode::kIOError);
  EXPECT_EQ(*mem.ReadFile("/d/a"), "x");
  EXPECT_FALSE(mem.Exists("/d/a.tmp"));  // cleaned up
  EXPECT_TRUE(WriteFileAtomically(&fs, "/d/a", "y", true).ok());  // transient
  fs.Reset();
  fs.CrashAtOp(3);
  EXPECT_FALSE(WriteFileAtomically(&fs, "/d/a", "z", true).ok());
  EXPECT_TRUE(fs.crashed());
  EXPECT_FALSE(fs.ReadFile("/d/a").ok());  // dead until Reset
  mem.SimulateCrash();
  fs.Reset();
  auto after = fs.ReadFile("/d/a");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, "y");
}

TEST(FaultFileSystemTest, NoSpaceWritesPartially) {
  MemFileSystem mem;
  FaultInjectingFileSystem fs(&mem);
  ASSERT_TRUE(fs.CreateDirs("/d").ok());
  fs.SetNoSpaceAfterBytes(3);
  auto f = fs.NewWritableFile("/d/a");
  ASSERT_TRUE(f.ok());
  Status st = (*f)->Append("hello");
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_NE(st.message().find("No space"), std::string::npos);
  EXPECT_EQ(*mem.ReadFile("/d/a"), "hel");
}

// A capacity, unlike SetNoSpaceAfterBytes, is freed by removing files and by
// renames over existing ones.
TEST(FaultFileSystemTest, CapacityIsFreedByRemovals) {
  MemFileSystem mem;
  FaultInjectingFileSystem fs(&mem);
  ASSERT_TRUE(fs.CreateDirs("/d").ok());
  fs.SetCapacityBytes(8);
  auto write = [&](const std::string& path, std::string_view data) {
    auto f = fs.NewWritableFile(path);
    EXPECT_TRUE(f.ok());
    return f.ok() ? (*f)->Append(data) : f.status();
  };
  ASSERT_TRUE(write("/d/a", "12345").ok());
  EXPECT_NE(write("/d/b", "6789").message().find("No space"), std::string::npos);
  EXPECT_EQ(fs.used_bytes(), 8u);
  ASSERT_TRUE(fs.RemoveFile("/d/b").ok());
  EXPECT_EQ(fs.used_bytes(), 5u);
  ASSERT_TRUE(write("/d/c", "abc").ok());
  ASSERT_TRUE(fs.RenameFile("/d/c", "/d/a").ok());  // a's 5 bytes are gone
  EXPECT_EQ(fs.used_bytes(), 3u);
}

TEST(FaultFileSystemTest, FailOpsFailsMatchingOperationsUntilCleared) {
  MemFileSystem mem;
  FaultInjectingFileSystem fs(&mem);
  ASSERT_TRUE(fs.CreateDirs("/d/blocks").ok());
  ASSERT_TRUE(mem.CreateDirs("/d/agents").ok());
  ASSERT_TRUE(WriteFileAtomically(&fs, "/d/blocks/x", "data", false).ok());
  ASSERT_TRUE(WriteFileAtomically(&fs, "/d/agents/y", "data", false).ok());
  fs.FailOps("read", "/blocks/");
  for (int i = 0; i < 3; ++i) {
    auto r = fs.ReadFile("/d/blocks/x");
    EXPECT_EQ(r.status().code(), StatusCode::kIOError);
    EXPECT_NE(r.status().message().find("Input/output error"), std::string::npos);
  }
  EXPECT_TRUE(fs.ReadFile("/d/agents/y").ok());
  EXPECT_TRUE(fs.FileSize("/d/blocks/x").ok());  // another operation
  fs.FailOps("", "");
  EXPECT_TRUE(fs.ReadFile("/d/blocks/x").ok());
}

class PosixFileSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/agentkv_fs_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    ASSERT_EQ(std::system(("rm -rf '" + dir_ + "'").c_str()), 0);
  }
  std::string dir_;
};

TEST_F(PosixFileSystemTest, BasicOperations) {
  PosixFileSystem fs;
  const std::string d = dir_ + "/a/b";
  ASSERT_TRUE(CreateDirsDurably(&fs, d, dir_).ok());
  ASSERT_TRUE(fs.CreateDirs(d).ok());  // idempotent
  ASSERT_TRUE(WriteFileAtomically(&fs, d + "/f", "hello", true).ok());
  EXPECT_EQ(*fs.ReadFile(d + "/f"), "hello");
  EXPECT_EQ(*fs.ReadRange(d + "/f", 1, 10), "ello");
  EXPECT_EQ(*fs.FileSize(d + "/f"), 5u);
  EXPECT_TRUE(fs.Exists(d + "/f"));
  EXPECT_FALSE(fs.Exists(d + "/f.tmp"));
  EXPECT_EQ(Names(&fs, dir_ + "/a"), (std::vector<std::string>{"b/"}));
  ASSERT_TRUE(fs.RenameFile(d + "/f", d + "/g").ok());
  EXPECT_EQ(fs.ReadFile(d + "/f").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fs.RemoveDir(d).code(), StatusCode::kIOError);
  ASSERT_TRUE(fs.RemoveFile(d + "/g").ok());
  ASSERT_TRUE(fs.RemoveDir(d).ok());
  EXPECT_EQ(fs.ListDir(d).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fs.NewWritableFile(d + "/x").status().code(), StatusCode::kNotFound);
}

// Cache files hold other people's conversations: owner-only, whatever the umask.
TEST_F(PosixFileSystemTest, NewFilesAndDirectoriesAreOwnerOnly) {
  PosixFileSystem fs;
  const mode_t old_umask = ::umask(0);
  const std::string d = dir_ + "/p/q";
  Status made = fs.CreateDirs(d);
  Status wrote = made.ok() ? WriteFileAtomically(&fs, d + "/f", "secret", true) : made;
  ::umask(old_umask);
  ASSERT_TRUE(wrote.ok()) << wrote.ToString();
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/p").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(d.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((d + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Issue 29 finding 6: a symlink planted where a block's or manifest's temp
// file goes made a root server write the conversation into the attacker's
// file (O_TRUNC followed it).
TEST_F(PosixFileSystemTest, LinkPlantedAtATempFileIsNotFollowed) {
  PosixFileSystem fs;
  const std::string victim = dir_ + "/victim", target = dir_ + "/m.json";
  std::ofstream(victim) << "untouched";
  ASSERT_EQ(::symlink(victim.c_str(), (target + std::string(kTempSuffix)).c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(&fs, target, "conversation", true).ok());
  EXPECT_EQ(Slurp(victim), "untouched");
  EXPECT_EQ(*fs.ReadFile(target), "conversation");
  struct stat st;
  ASSERT_EQ(::lstat(target.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Nor at the file itself: NewWritableFile and reads refuse the link.
TEST_F(PosixFileSystemTest, LinkPlantedAtAFileIsNeitherWrittenNorRead) {
  PosixFileSystem fs;
  const std::string victim = dir_ + "/victim", target = dir_ + "/b.safetensors";
  std::ofstream(victim) << "untouched";
  ASSERT_EQ(::symlink(victim.c_str(), target.c_str()), 0);
  auto w = fs.NewWritableFile(target);
  EXPECT_EQ(w.status().code(), StatusCode::kFailedPrecondition) << w.status().ToString();
  EXPECT_EQ(Slurp(victim), "untouched");
  EXPECT_FALSE(fs.ReadFile(target).ok());
  EXPECT_FALSE(fs.LockFile(target).ok());
  // A hard link to a file elsewhere is not truncated either.
  const std::string hard = dir_ + "/hard";
  ASSERT_EQ(::link(victim.c_str(), hard.c_str()), 0);
  EXPECT_EQ(fs.NewWritableFile(hard).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Slurp(victim), "untouched");
}

// Issue 29 finding 6: a file that was left 0644 stays no longer so once rewritten.
TEST_F(PosixFileSystemTest, RewrittenFileBecomesOwnerOnly) {
  PosixFileSystem fs;
  const std::string f = dir_ + "/f";
  std::ofstream(f) << "old";
  ASSERT_EQ(::chmod(f.c_str(), 0644), 0);
  ASSERT_TRUE(WriteUnsynced(&fs, f, "new").ok());
  struct stat st;
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Slurp(f), "new");
}

// Issue 29 finding 6: pre-existing directories were trusted whatever their
// owner or mode.
TEST_F(PosixFileSystemTest, CheckPrivateDirRefusesLinksWritableAndForeignDirs) {
  PosixFileSystem fs;
  const std::string d = dir_ + "/d";
  ASSERT_TRUE(fs.CreateDirs(d).ok());
  EXPECT_TRUE(fs.CheckPrivateDir(d).ok());
  EXPECT_EQ(fs.CheckPrivateDir(dir_ + "/absent").code(), StatusCode::kNotFound);
  for (mode_t mode : {0777, 0770, 0702, 01777}) {
    ASSERT_EQ(::chmod(d.c_str(), mode), 0);
    Status st = fs.CheckPrivateDir(d);
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << std::oct << mode;
    EXPECT_NE(st.message().find("chmod 700"), std::string::npos) << st.ToString();
  }
  ASSERT_EQ(::chmod(d.c_str(), 0700), 0);
  const std::string link = dir_ + "/link";
  ASSERT_EQ(::symlink(d.c_str(), link.c_str()), 0);
  EXPECT_EQ(fs.CheckPrivateDir(link).code(), StatusCode::kFailedPrecondition);
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_EQ(fs.CheckPrivateDir(dir_ + "/file").code(), StatusCode::kFailedPrecondition);
  // Another owner: needs the right to chown (root here).
  if (::chown(d.c_str(), 65534, 65534) != 0) GTEST_SKIP() << "chown not permitted: ownership case not tested";
  Status st = fs.CheckPrivateDir(d);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("owned by uid 65534"), std::string::npos) << st.ToString();
}

// CreateDirs never creates through a link planted where a directory goes.
TEST_F(PosixFileSystemTest, CreateDirsThroughAPlantedLinkFails) {
  PosixFileSystem fs;
  const std::string elsewhere = dir_ + "/elsewhere";
  ASSERT_EQ(::mkdir(elsewhere.c_str(), 0700), 0);
  ASSERT_EQ(::symlink("/nonexistent-agentkv-target", (dir_ + "/dangling").c_str()), 0);
  EXPECT_FALSE(fs.CreateDirs(dir_ + "/dangling").ok());
  EXPECT_FALSE(fs.Exists("/nonexistent-agentkv-target"));
}

}  // namespace
}  // namespace agentkv

namespace agentkv {
namespace {

// The thread rule's check: accesses from a forbidden thread are counted, by
// every implementation; other threads' are not.
TEST(FileAccessRuleTest, CountsAccessesFromForbiddenThreadsOnly) {
  MemFileSystem mem;
  const uint64_t before = ForbiddenFileAccesses();
  EXPECT_TRUE(DefaultFileSystem()->Exists("/"));
  (void)mem.Exists("/x");
  EXPECT_EQ(ForbiddenFileAccesses(), before);
  ForbidFileAccessOnThisThread(true);
  EXPECT_TRUE(DefaultFileSystem()->Exists("/"));
  (void)mem.Exists("/x");
  ForbidFileAccessOnThisThread(false);
  EXPECT_EQ(ForbiddenFileAccesses(), before + 2);
}

}  // namespace
}  // namespace agentkv
