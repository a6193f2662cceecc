#pragma once
// MemFileSystem: an in-memory FileSystem for tests that models durability.
//
// Each path has a *current* state (what reads see) and a *durable* state (what
// survives SimulateCrash()):
//   - a file's bytes become durable at WritableFile::Sync();
//   - a directory entry (file or subdirectory created, renamed, removed)
//     becomes durable at SyncDir() of its parent; an entry is lost in a crash
//     if any ancestor directory is not durable.
// SimulateCrash() replaces the current state by the durable one: unsynced
// bytes, unsynced renames/creations are dropped, unsynced removals undone.
// Writable handles opened before a crash write into detached files.
//
// The root ("/" for absolute paths, "" for relative ones) always exists.
// "." is treated as the relative root.
//
// Thread safety: all methods are internally synchronized (one mutex).

#include <map>
#include <set>

#include "store/file_system.h"
#include "util/mutex.h"

namespace agentkv {

class MemFileSystem final : public FileSystem {
 public:
  MemFileSystem() = default;

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Result<std::string> ReadFile(const std::string& path) override;
  Result<std::string> ReadRange(const std::string& path, uint64_t offset, size_t n) override;
  Result<uint64_t> FileSize(const std::string& path) override;
  bool Exists(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override;
  Status CreateDirs(const std::string& dir) override;
  Status RemoveDir(const std::string& dir) override;
  Status SyncDir(const std::string& dir) override;
  // Locks live in this object (two locks of one MemFileSystem conflict); the
  // lock file is created like an unsynced empty file.
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override;
  Result<bool> IsLockHeld(const std::string& path) override;

  // Drops everything not yet durable (see above).
  void SimulateCrash();

  // Test helpers (no durability bookkeeping is skipped: they act like a
  // synced write / an in-place edit of synced bytes, e.g. bit rot).
  // Replaces a file's bytes in both current and durable state.
  Status CorruptFile(const std::string& path, const std::string& new_bytes);
  // All current file paths (sorted).
  std::vector<std::string> AllFiles();

 private:
  struct File {
    std::string data;    // what reads see
    std::string synced;  // what a crash keeps
  };
  class Writer;
  friend class Writer;
  class Lock;
  friend class Lock;

  bool IsDirLocked(const std::string& path) const REQUIRES(mu_);
  static std::string Norm(const std::string& path);

  Mutex mu_;
  std::map<std::string, std::shared_ptr<File>> files_ GUARDED_BY(mu_);          // current
  std::set<std::string> dirs_ GUARDED_BY(mu_);                                  // current
  std::map<std::string, std::shared_ptr<File>> durable_files_ GUARDED_BY(mu_);  // durable entries
  std::set<std::string> durable_dirs_ GUARDED_BY(mu_);
  std::set<std::string> locked_ GUARDED_BY(mu_);  // paths whose lock is held
};

}  // namespace agentkv
