#pragma once
// GatedFileSystem (tests): forwards every call to a base FileSystem; reads of
// paths containing the reads part, and new files at paths containing the
// writes part, wait while the gate is closed. A test holds a disk read (or a
// save) for as long as it likes and checks what keeps going meanwhile, with
// no wall-time assertion: it opens the gate once it has seen it.
// Thread-safe if the base is. ConcurrentReads() is true (the store's
// parallel, streaming read path).

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/file_system.h"

namespace agentkv::store_test {

class GatedFileSystem final : public FileSystem {
 public:
  explicit GatedFileSystem(FileSystem* base = DefaultFileSystem()) : base_(base) {}

  // Closes the gate for reads of paths containing `reads_part` and new files
  // at paths containing `writes_part` (an empty part holds nothing).
  void Close(std::string reads_part, std::string writes_part) {
    std::lock_guard<std::mutex> l(mu_);
    reads_part_ = std::move(reads_part);
    writes_part_ = std::move(writes_part);
    closed_ = true;
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = false;
    cv_.notify_all();
  }
  // How many operations are waiting at the gate now.
  int held() {
    std::lock_guard<std::mutex> l(mu_);
    return held_;
  }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    Gate(path, /*write=*/true);
    return base_->NewWritableFile(path);
  }
  Result<std::string> ReadFile(const std::string& path) override {
    Gate(path, /*write=*/false);
    return base_->ReadFile(path);
  }
  Result<std::string> ReadRange(const std::string& path, uint64_t offset, size_t n) override {
    Gate(path, /*write=*/false);
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
  bool ConcurrentReads() const override { return true; }

 private:
  void Gate(const std::string& path, bool write) {
    std::unique_lock<std::mutex> l(mu_);
    const std::string& part = write ? writes_part_ : reads_part_;
    if (!closed_ || part.empty() || path.find(part) == std::string::npos) return;
    ++held_;
    cv_.notify_all();
    cv_.wait(l, [&] { return !closed_; });
    --held_;
  }

  FileSystem* const base_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int held_ = 0;
  std::string reads_part_, writes_part_;
};

}  // namespace agentkv::store_test
