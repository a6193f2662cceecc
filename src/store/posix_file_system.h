#pragma once
// PosixFileSystem: FileSystem on the real disk. The only code in store/ that
// calls POSIX. Stateless; thread-safe.

#include "store/file_system.h"

namespace agentkv {

class PosixFileSystem final : public FileSystem {
 public:
  // Never follows a symlink at `path`; truncates only a regular file of ours.
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  // Unlinks whatever is at `path`, then O_CREAT | O_EXCL | O_NOFOLLOW, 0600.
  Result<std::unique_ptr<WritableFile>> NewTempFile(const std::string& path) override;
  Status CheckPrivateDir(const std::string& dir) override;
  Result<std::string> ReadFile(const std::string& path) override;
  bool ConcurrentReads() const override { return true; }  // plain syscalls, no shared state
  Result<std::string> ReadRange(const std::string& path, uint64_t offset, size_t n) override;
  Result<size_t> ReadScattered(const std::string& path, uint64_t offset,
                               std::span<const std::span<uint8_t>> pieces) override;
  Result<uint64_t> FileSize(const std::string& path) override;
  bool Exists(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override;
  Status CreateDirs(const std::string& dir) override;
  Status RemoveDir(const std::string& dir) override;
  Status SyncDir(const std::string& dir) override;
  // Linux: an open-file-description lock (fcntl F_OFD_SETLK), so a second
  // lock conflicts within one process too and works on NFS; elsewhere flock().
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override;
  Result<bool> IsLockHeld(const std::string& path) override;
};

}  // namespace agentkv
