// One writer per cache directory: a writable AgentStore holds <cache_dir>/LOCK
// for its lifetime; a second writer (another server, `cache rm`) is refused
// before it deletes anything; read-only stores open beside it and say so.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/agent_store.h"
#include "store/mem_file_system.h"
#include "store/posix_file_system.h"
#include "store/store_ids.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT

// Files a save of another process would have in flight: a temp block file
// and a finished block file no manifest names yet.
void LeaveInFlightFiles(FileSystem* fs, const std::string& cache_dir, std::vector<std::string>* paths) {
  const std::string blocks = cache_dir + "/" + kFp + "/" + NameHash("ns") + "/blocks/";
  const std::string id = ComputeBlockIds(kFp, MakeTokens(300, 77))[0];
  for (const std::string& p : {blocks + id + ".safetensors.tmp", blocks + id + ".safetensors"}) {
    auto f = fs->NewWritableFile(p);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE((*f)->Append("in flight").ok());
    ASSERT_TRUE((*f)->Close().ok());
    paths->push_back(p);
  }
}

// The FileSystem contract, on both implementations: one holder at a time,
// released with its object; a test takes no lock; no file, no holder.
TEST(CacheLockTest, FileSystemLockContract) {
  MemFileSystem mem;
  ASSERT_TRUE(mem.CreateDirs("/d").ok());
  std::string dir = ::testing::TempDir() + "/agentkv_fslock_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  PosixFileSystem posix;
  for (auto [fs, root] : {std::pair<FileSystem*, std::string>{&mem, "/d"}, {&posix, dir}}) {
    const std::string path = root + "/LOCK";
    EXPECT_FALSE(*fs->IsLockHeld(path)) << root;  // absent
    {
      auto lock = fs->LockFile(path);
      ASSERT_TRUE(lock.ok()) << lock.status().ToString();
      EXPECT_TRUE(fs->Exists(path));
      EXPECT_TRUE(*fs->IsLockHeld(path));
      EXPECT_TRUE(*fs->IsLockHeld(path));  // testing did not take it
      auto second = fs->LockFile(path);
      EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition) << root;
    }
    EXPECT_FALSE(*fs->IsLockHeld(path)) << root;
    EXPECT_TRUE(fs->LockFile(path).ok()) << root;
    EXPECT_FALSE(fs->LockFile(root + "/no/such/dir/LOCK").ok()) << root;
  }
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

TEST(CacheLockTest, SecondWriterIsRefusedAndDeletesNothing) {
  MemFileSystem mem;
  auto server = AgentStore::Open(Options(&mem));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE(Save(server->get(), "ns", "a", MakeTokens(300, 1)).ok());
  std::vector<std::string> in_flight;
  LeaveInFlightFiles(&mem, "/cache", &in_flight);

  auto second = AgentStore::Open(Options(&mem));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("in use by another agentkv process"), std::string::npos)
      << second.status().ToString();
  EXPECT_NE(second.status().message().find("/cache/LOCK"), std::string::npos);
  // Another model on the same cache dir is refused too (one process per dir).
  AgentStoreOptions other = Options(&mem);
  other.fingerprint = "fp-other";
  EXPECT_EQ(AgentStore::Open(other).status().code(), StatusCode::kFailedPrecondition);
  for (const auto& p : in_flight) EXPECT_TRUE(mem.Exists(p)) << p;

  server->reset();  // the lock goes with the store
  auto after = AgentStore::Open(Options(&mem));
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_FALSE((*after)->live());
  EXPECT_TRUE(LoadsExactly(after->get(), "ns", "a", MakeTokens(300, 1)));
}

TEST(CacheLockTest, ReadOnlyStoreOpensBesideTheWriterAndSaysItIsLive) {
  MemFileSystem mem;
  AgentStoreOptions ro = Options(&mem);
  ro.read_only = true;
  {
    auto idle = AgentStore::Open(ro);  // no cache dir yet, no lock file
    ASSERT_TRUE(idle.ok()) << idle.status().ToString();
    EXPECT_FALSE((*idle)->live());
  }
  auto server = AgentStore::Open(Options(&mem));
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(Save(server->get(), "ns", "a", MakeTokens(300, 1)).ok());
  std::vector<std::string> in_flight;
  LeaveInFlightFiles(&mem, "/cache", &in_flight);
  const auto before = mem.AllFiles();

  auto reader = AgentStore::Open(ro);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_TRUE((*reader)->live());
  EXPECT_TRUE(LoadsExactly(reader->get(), "ns", "a", MakeTokens(300, 1)));
  EXPECT_EQ(mem.AllFiles(), before);  // temp file and unnamed block kept
  server->reset();
  auto later = AgentStore::Open(ro);
  ASSERT_TRUE(later.ok());
  EXPECT_FALSE((*later)->live());
}

// The real lock: two stores of one process conflict (an open-file-description
// lock, not a per-process one), another process is refused, and a holder
// killed with SIGKILL releases it.
TEST(CacheLockTest, PosixLockExcludesOtherProcessesUntilTheHolderDies) {
  std::string dir = ::testing::TempDir() + "/agentkv_lock_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  PosixFileSystem fs;
  {
    auto first = AgentStore::Open(Options(&fs, dir));
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_EQ(AgentStore::Open(Options(&fs, dir)).status().code(), StatusCode::kFailedPrecondition);
    auto held = fs.IsLockHeld(CacheLockPath(dir));
    ASSERT_TRUE(held.ok());
    EXPECT_TRUE(*held);
  }
  auto held = fs.IsLockHeld(CacheLockPath(dir));
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(*held);

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the "server": holds the lock until killed
    auto s = AgentStore::Open(Options(&fs, dir));
    const char c = s.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  held = fs.IsLockHeld(CacheLockPath(dir));
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(*held);
  auto refused = AgentStore::Open(Options(&fs, dir));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().ToString();
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  auto after = AgentStore::Open(Options(&fs, dir));
  EXPECT_TRUE(after.ok()) << after.status().ToString();
  ::close(ready[0]);
  ::close(ready[1]);
  after = Status::Internal("close");
  ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

}  // namespace
}  // namespace agentkv
