#pragma once
// FaultInjectingFileSystem: wraps a FileSystem, counts every operation and
// injects failures (LevelDB db/fault_injection_test.cc style).
//
// Every call is one operation: each FileSystem method and each
// WritableFile::Append/Sync/Close. Operations are numbered from 1 since the
// last Reset().
//
//   FailOpAt(n)      operation n returns IOError and has no effect; later ones
//                    work (a transient error).
//   CrashAtOp(n)     operation n and every later one fail with IOError
//                    ("simulated crash"): the process is "dead". The test then
//                    calls MemFileSystem::SimulateCrash() on the base, Reset(),
//                    and reopens the store.
//   SetNoSpaceAfterBytes(b)  once `b` bytes in total were appended, Append
//                    writes what still fits and fails with IOError
//                    "No space left on device" (ENOSPC).
//   SetCapacityBytes(b)  a disk of `b` bytes: used_bytes() may not exceed
//                    `b`; Append writes what fits and fails with ENOSPC.
//                    Unlike SetNoSpaceAfterBytes, deleting files makes room.
//   FailOps(op, path_part)  every later operation named `op` ("read",
//                    "append", "sync", "rename", ... as in log()) on a path
//                    containing `path_part` fails with IOError
//                    "Input/output error" (EIO) and has no effect, until
//                    Reset() or FailOps("", "").
//
// Thread safety: internally synchronized.

#include <string>

#include "store/file_system.h"
#include "util/mutex.h"

namespace agentkv {

class FaultInjectingFileSystem final : public FileSystem {
 public:
  // `base` is not owned and must outlive this object.
  explicit FaultInjectingFileSystem(FileSystem* base) : base_(base) {}

  void FailOpAt(uint64_t n);
  void CrashAtOp(uint64_t n);
  void SetNoSpaceAfterBytes(uint64_t bytes);
  void SetCapacityBytes(uint64_t bytes);
  void FailOps(std::string op, std::string path_part);
  // Bytes appended since construction or Reset(), minus the sizes of files
  // removed or replaced by a rename since then (not below 0).
  uint64_t used_bytes() const;
  // Clears the fault plan, the crashed flag, the counters and the log.
  void Reset();

  bool crashed() const;
  uint64_t op_count() const;
  // One line per operation: "<op> <path>", e.g. "create /c/fp/ns/blocks/x.tmp".
  std::vector<std::string> log() const;
  // Number of logged operations whose line starts with `op` and contains
  // `path_part`.
  size_t CountOps(std::string_view op, std::string_view path_part = "") const;

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
  // Passed through (no fault is injected): the wrapped disk's ownership rule.
  Status CheckPrivateDir(const std::string& dir) override { return base_->CheckPrivateDir(dir); }
  Status SyncDir(const std::string& dir) override;
  // Taking a lock is an operation ("lock"); releasing it is not (it cannot fail).
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override;
  Result<bool> IsLockHeld(const std::string& path) override;

 private:
  class Writer;
  // Counts and logs one operation; returns the injected error, if any.
  Status Begin(std::string_view op, const std::string& path);
  // For Append: how many of `size` bytes may be written before ENOSPC.
  size_t ReserveBytes(size_t size);
  // `path` (if present) is about to be removed or replaced: used_ shrinks.
  void ReleaseBytesOf(const std::string& path);

  FileSystem* const base_;
  mutable Mutex mu_;
  uint64_t ops_ GUARDED_BY(mu_) = 0;
  uint64_t fail_at_ GUARDED_BY(mu_) = 0;
  uint64_t crash_at_ GUARDED_BY(mu_) = 0;
  bool crashed_ GUARDED_BY(mu_) = false;
  uint64_t bytes_appended_ GUARDED_BY(mu_) = 0;
  uint64_t no_space_after_ GUARDED_BY(mu_) = UINT64_MAX;
  uint64_t capacity_ GUARDED_BY(mu_) = UINT64_MAX;
  uint64_t used_ GUARDED_BY(mu_) = 0;
  std::string fail_op_ GUARDED_BY(mu_);
  std::string fail_path_part_ GUARDED_BY(mu_);
  std::vector<std::string> log_ GUARDED_BY(mu_);
};

}  // namespace agentkv
