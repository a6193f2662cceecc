#pragma once
// GatedFileSystem (tests): forwards every call to a base FileSystem; reads of
// paths containing the reads part, new files at paths containing the writes
// part and removals of paths containing the removes part wait while the gate
// is closed. A test holds a disk read (or a
// save) for as long as it likes and checks what keeps going meanwhile, with
// no wall-time assertion: it opens the gate once it has seen it.
// Thread-safe if the base is. ConcurrentReads() is true (the store's
// parallel, streaming read path).

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/forwarding_file_system_test_util.h"

namespace agentkv::store_test {

class GatedFileSystem final : public ForwardingFileSystem {
 public:
  explicit GatedFileSystem(FileSystem* base = DefaultFileSystem()) : ForwardingFileSystem(base, /*concurrent=*/true) {}

  // Closes the gate for reads of paths containing `reads_part`, new files at
  // paths containing `writes_part` and removals of paths containing
  // `removes_part` (an empty part holds nothing).
  void Close(std::string reads_part, std::string writes_part, std::string removes_part = "") {
    std::lock_guard<std::mutex> l(mu_);
    reads_part_ = std::move(reads_part);
    writes_part_ = std::move(writes_part);
    removes_part_ = std::move(removes_part);
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
    return base()->NewWritableFile(path);
  }
  Status RemoveFile(const std::string& path) override {
    Gate(path, removes_part_);
    return base()->RemoveFile(path);
  }
  Result<std::string> ReadFile(const std::string& path) override {
    Gate(path, /*write=*/false);
    return base()->ReadFile(path);
  }
  Result<std::string> ReadRange(const std::string& path, uint64_t offset, size_t n) override {
    Gate(path, /*write=*/false);
    return base()->ReadRange(path, offset, n);
  }

 private:
  void Gate(const std::string& path, bool write) { Gate(path, write ? writes_part_ : reads_part_); }
  void Gate(const std::string& path, const std::string& part) {
    std::unique_lock<std::mutex> l(mu_);
    if (!closed_ || part.empty() || path.find(part) == std::string::npos) return;
    ++held_;
    cv_.notify_all();
    cv_.wait(l, [&] { return !closed_; });
    --held_;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int held_ = 0;
  std::string reads_part_, writes_part_, removes_part_;
};

}  // namespace agentkv::store_test
