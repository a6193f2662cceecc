#pragma once
// HookedFileSystem (tests): forwards every call to a base FileSystem and
// calls `read_hook` before each ReadRange / ReadScattered, which can fail the
// read (return an error: it has no effect then) or change the base first (a
// file truncated while it is read). ConcurrentReads() is `concurrent`, so the
// store's parallel read path runs over a wrapped MemFileSystem too.
// Thread-safe if the base and the hook are.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/file_system.h"

namespace agentkv::store_test {

class HookedFileSystem final : public FileSystem {
 public:
  using ReadHook = std::function<Status(const std::string& path, uint64_t offset, size_t n)>;
  HookedFileSystem(FileSystem* base, bool concurrent) : base_(base), concurrent_(concurrent) {}
  ReadHook read_hook;  // set before use; nullptr: no hook

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return base_->NewWritableFile(path);
  }
  Result<std::string> ReadFile(const std::string& path) override { return base_->ReadFile(path); }
  Result<std::string> ReadRange(const std::string& path, uint64_t offset, size_t n) override {
    if (read_hook) AGENTKV_RETURN_IF_ERROR(read_hook(path, offset, n));
    return base_->ReadRange(path, offset, n);
  }
  Result<size_t> ReadScattered(const std::string& path, uint64_t offset,
                               std::span<const std::span<uint8_t>> pieces) override {
    size_t n = 0;
    for (auto p : pieces) n += p.size();
    if (read_hook) AGENTKV_RETURN_IF_ERROR(read_hook(path, offset, n));
    return base_->ReadScattered(path, offset, pieces);
  }
  Result<uint64_t> FileSize(const std::string& path) override { return base_->FileSize(path); }
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  Status RenameFile(const std::string& from, const std::string& to) override { return base_->RenameFile(from, to); }
  Status RemoveFile(const std::string& path) override { return base_->RemoveFile(path); }
  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override { return base_->ListDir(dir); }
  Status CreateDirs(const std::string& dir) override { return base_->CreateDirs(dir); }
  Status RemoveDir(const std::string& dir) override { return base_->RemoveDir(dir); }
  Status SyncDir(const std::string& dir) override { return base_->SyncDir(dir); }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override { return base_->LockFile(path); }
  Result<bool> IsLockHeld(const std::string& path) override { return base_->IsLockHeld(path); }
  bool ConcurrentReads() const override { return concurrent_; }

 private:
  FileSystem* const base_;
  const bool concurrent_;
};

}  // namespace agentkv::store_test
