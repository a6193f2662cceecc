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

#include "store/forwarding_file_system_test_util.h"

namespace agentkv::store_test {

class HookedFileSystem final : public ForwardingFileSystem {
 public:
  using ReadHook = std::function<Status(const std::string& path, uint64_t offset, size_t n)>;
  HookedFileSystem(FileSystem* base, bool concurrent) : ForwardingFileSystem(base, concurrent) {}
  ReadHook read_hook;  // set before use; nullptr: no hook

  Result<std::string> ReadRange(const std::string& path, uint64_t offset, size_t n) override {
    if (read_hook) AGENTKV_RETURN_IF_ERROR(read_hook(path, offset, n));
    return base()->ReadRange(path, offset, n);
  }
  Result<size_t> ReadScattered(const std::string& path, uint64_t offset,
                               std::span<const std::span<uint8_t>> pieces) override {
    size_t n = 0;
    for (auto p : pieces) n += p.size();
    if (read_hook) AGENTKV_RETURN_IF_ERROR(read_hook(path, offset, n));
    return base()->ReadScattered(path, offset, pieces);
  }
};

}  // namespace agentkv::store_test
