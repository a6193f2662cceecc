#include "bench/raw_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace agentkv::bench {
namespace {

Status Errno(const std::string& op, const std::string& path) {
  return Status::IOError(op + ": " + path + ": " + std::strerror(errno));
}

// Closes the descriptor on every path out of a function.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace

Status WriteFileSynced(const std::string& path, std::span<const uint8_t> data) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return Errno("open", path);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("write", path);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return Errno("fsync", path);
  if (::close(fd.Release()) != 0) return Errno("close", path);
  return Status::OK();
}

Result<uint64_t> ReadFileSequential(const std::string& path, size_t buffer_bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("open", path);
  std::vector<uint8_t> buffer(buffer_bytes);
  uint64_t total = 0;
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("read", path);
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
  }
  return total;
}

Status DropFromPageCache(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("open", path);
  if (::fdatasync(fd.get()) != 0) return Errno("fdatasync", path);
  const int rc = ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);  // returns the error, not errno
  if (rc != 0) return Status::IOError("posix_fadvise: " + path + ": " + std::strerror(rc));
  return Status::OK();
}

Result<double> ResidentFraction(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("open", path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Errno("fstat", path);
  if (st.st_size == 0) return 0.0;
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return Errno("mmap", path);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((size + page - 1) / page);
  const int rc = ::mincore(map, size, vec.data());
  const int saved_errno = errno;
  ::munmap(map, size);
  errno = saved_errno;
  if (rc != 0) return Errno("mincore", path);
  size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return static_cast<double>(resident) / static_cast<double>(vec.size());
}

}  // namespace agentkv::bench
