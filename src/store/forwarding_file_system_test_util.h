#pragma once
// ForwardingFileSystem (tests): forwards every call to a base FileSystem; the
// test doubles that hook some calls (HookedFileSystem, GatedFileSystem)
// derive from it and override only those. ConcurrentReads() is `concurrent`.
// Thread-safe if the base is.

#include <memory>
#include <string>
#include <vector>

#include "store/file_system.h"

namespace agentkv::store_test {

class ForwardingFileSystem : public FileSystem {
 public:
  ForwardingFileSystem(FileSystem* base, bool concurrent) : base_(base), concurrent_(concurrent) {}

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return base_->NewWritableFile(path);
  }
  Result<std::string> ReadFile(const std::string& path) override { return base_->ReadFile(path); }
  Result<std::string> ReadRange(const std::string& path, uint64_t offset, size_t n) override {
    return base_->ReadRange(path, offset, n);
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

 protected:
  FileSystem* base() const { return base_; }

 private:
  FileSystem* const base_;
  const bool concurrent_;
};

}  // namespace agentkv::store_test
