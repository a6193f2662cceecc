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
//
// Thread safety: internally synchronized.

#include <mutex>

#include "store/file_system.h"

namespace agentkv {

class FaultInjectingFileSystem final : public FileSystem {
 public:
  // `base` is not owned and must outlive this object.
  explicit FaultInjectingFileSystem(FileSystem* base) : base_(base) {}

  void FailOpAt(uint64_t n);
  void CrashAtOp(uint64_t n);
  void SetNoSpaceAfterBytes(uint64_t bytes);
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

  FileSystem* const base_;
  mutable std::mutex mu_;
  uint64_t ops_ = 0;
  uint64_t fail_at_ = 0;
  uint64_t crash_at_ = 0;
  bool crashed_ = false;
  uint64_t bytes_appended_ = 0;
  uint64_t no_space_after_ = UINT64_MAX;
  std::vector<std::string> log_;
};

}  // namespace agentkv
