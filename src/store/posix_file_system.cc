#include "store/posix_file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "util/private_path.h"

namespace agentkv {
namespace {

Status PosixError(const char* op, const std::string& path, int err) {
  std::string msg = std::string(op) + " " + path + ": " + std::strerror(err);
  if (err == ENOENT) return Status::NotFound(std::move(msg));
  return Status::IOError(std::move(msg));
}

// fsync that reaches the platter on macOS too (plain fsync does not there).
int FullSync(int fd) {
#ifdef __APPLE__
  if (::fcntl(fd, F_FULLFSYNC) == 0) return 0;
#endif
  return ::fsync(fd);
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return PosixError("write", path_, errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return Status::OK();
  }
  Status Sync() override {
    if (FullSync(fd_) != 0) return PosixError("fsync", path_, errno);
    return Status::OK();
  }
  Status Close() override {
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return PosixError("close", path_, errno);
    return Status::OK();
  }

 private:
  std::string path_;
  int fd_;
};

// Holds the descriptor whose lock it is; closing it releases the lock.
class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }

 private:
  const int fd_;
};

// 0, or the errno of a failed attempt to lock (or test) the whole file.
// `exclusive`: a write lock; else a read lock. `test`: only ask whether a
// conflicting lock is held (*held), do not take it.
int LockWholeFile(int fd, bool exclusive, bool test, bool* held) {
#ifdef F_OFD_SETLK
  struct flock fl = {};
  fl.l_type = exclusive ? F_WRLCK : F_RDLCK;
  fl.l_whence = SEEK_SET;  // l_start = l_len = 0: the whole file; l_pid must be 0
  if (::fcntl(fd, test ? F_OFD_GETLK : F_OFD_SETLK, &fl) != 0) return errno;
  if (test) *held = fl.l_type != F_UNLCK;
  return 0;
#else
  // flock locks belong to the open file description too (BSD, macOS). A
  // test takes a shared lock for an instant.
  if (::flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    if (test && errno == EWOULDBLOCK) {
      *held = true;
      return 0;
    }
    return errno;
  }
  if (test) {
    *held = false;
    ::flock(fd, LOCK_UN);
  }
  return 0;
#endif
}

Result<std::string> ReadAt(const std::string& path, uint64_t offset, size_t n, bool whole) {
  // O_NOFOLLOW: a link planted as a manifest or block is not read through.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return PosixError("open", path, errno);
  if (whole) {
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return PosixError("stat", path, err);
    }
    n = static_cast<size_t>(st.st_size);
  }
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, out.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return PosixError("read", path, err);
    }
    if (r == 0) break;  // end of file (it may have shrunk since fstat)
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

}  // namespace

FileSystem* DefaultFileSystem() {
  static PosixFileSystem* fs = new PosixFileSystem();  // stateless; never destroyed
  return fs;
}

Result<std::unique_ptr<WritableFile>> PosixFileSystem::NewWritableFile(const std::string& path) {
  NoteFileAccess("NewWritableFile", path);
  // Owner-only: manifests hold the agents' conversations in plain text. A
  // symlink or another user's file planted at `path` is refused, not written.
  AGENTKV_ASSIGN_OR_RETURN(int fd, OpenPrivateFile(path, /*exclusive=*/false));
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
}

Result<std::unique_ptr<WritableFile>> PosixFileSystem::NewTempFile(const std::string& path) {
  NoteFileAccess("NewTempFile", path);
  AGENTKV_ASSIGN_OR_RETURN(int fd, OpenPrivateFile(path, /*exclusive=*/true));
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
}

Status PosixFileSystem::CheckPrivateDir(const std::string& dir) {
  NoteFileAccess("CheckPrivateDir", dir);
  return agentkv::CheckPrivateDir(dir);
}

Result<std::string> PosixFileSystem::ReadFile(const std::string& path) {
  NoteFileAccess("ReadFile", path);
  return ReadAt(path, 0, 0, /*whole=*/true);
}

Result<std::string> PosixFileSystem::ReadRange(const std::string& path, uint64_t offset, size_t n) {
  NoteFileAccess("ReadRange", path);
  return ReadAt(path, offset, n, /*whole=*/false);
}

Result<size_t> PosixFileSystem::ReadScattered(const std::string& path, uint64_t offset,
                                              std::span<const std::span<uint8_t>> pieces) {
  NoteFileAccess("ReadScattered", path);
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return PosixError("open", path, errno);
  std::vector<iovec> iov;
  iov.reserve(pieces.size());
  for (auto piece : pieces) {
    if (!piece.empty()) iov.push_back({piece.data(), piece.size()});
  }
  size_t got = 0;
  size_t first = 0;  // iov[first..] still to fill; iov[first] may be partly filled
  while (first < iov.size()) {
    const int n_iov = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    ssize_t r = ::preadv(fd, iov.data() + first, n_iov, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return PosixError("read", path, err);
    }
    if (r == 0) break;  // end of file
    got += static_cast<size_t>(r);
    for (size_t left = static_cast<size_t>(r); left > 0;) {
      const size_t take = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + take;
      iov[first].iov_len -= take;
      left -= take;
      if (iov[first].iov_len == 0) ++first;
    }
  }
  ::close(fd);
  return got;
}

Result<uint64_t> PosixFileSystem::FileSize(const std::string& path) {
  NoteFileAccess("FileSize", path);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return PosixError("stat", path, errno);
  return static_cast<uint64_t>(st.st_size);
}

bool PosixFileSystem::Exists(const std::string& path) {
  NoteFileAccess("Exists", path);
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Status PosixFileSystem::RenameFile(const std::string& from, const std::string& to) {
  NoteFileAccess("RenameFile", from);
  if (::rename(from.c_str(), to.c_str()) != 0) return PosixError("rename", from + " -> " + to, errno);
  return Status::OK();
}

Status PosixFileSystem::RemoveFile(const std::string& path) {
  NoteFileAccess("RemoveFile", path);
  if (::unlink(path.c_str()) != 0) return PosixError("unlink", path, errno);
  return Status::OK();
}

Result<std::vector<DirEntry>> PosixFileSystem::ListDir(const std::string& dir) {
  NoteFileAccess("ListDir", dir);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return PosixError("opendir", dir, errno);
  std::vector<DirEntry> out;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = ::lstat(JoinPath(dir, name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);  // a link is no dir
    }
    out.push_back({std::move(name), is_dir});
  }
  ::closedir(d);
  return out;
}

Status PosixFileSystem::CreateDirs(const std::string& dir) {
  NoteFileAccess("CreateDirs", dir);
  return CreatePrivateDirs(dir);  // 0700 whatever the umask; never through a planted link
}

Status PosixFileSystem::RemoveDir(const std::string& dir) {
  NoteFileAccess("RemoveDir", dir);
  if (::rmdir(dir.c_str()) != 0) return PosixError("rmdir", dir, errno);
  return Status::OK();
}

Status PosixFileSystem::SyncDir(const std::string& dir) {
  NoteFileAccess("SyncDir", dir);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PosixError("open dir", dir, errno);
  int rc = FullSync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return PosixError("fsync dir", dir, err);
  return Status::OK();
}

Result<std::unique_ptr<FileLock>> PosixFileSystem::LockFile(const std::string& path) {
  NoteFileAccess("LockFile", path);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return PosixError("create lock file", path, errno);
  int err = LockWholeFile(fd, /*exclusive=*/true, /*test=*/false, nullptr);
  if (err != 0) {
    ::close(fd);
    if (err == EAGAIN || err == EACCES || err == EWOULDBLOCK) {
      return Status::FailedPrecondition("lock " + path + ": held by another process");
    }
    return PosixError("lock", path, err);
  }
  return std::unique_ptr<FileLock>(new PosixFileLock(fd));
}

Result<bool> PosixFileSystem::IsLockHeld(const std::string& path) {
  NoteFileAccess("IsLockHeld", path);
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    return PosixError("open lock file", path, errno);
  }
  bool held = false;
  // A read lock conflicts exactly with the writer's exclusive lock.
  int err = LockWholeFile(fd, /*exclusive=*/false, /*test=*/true, &held);
  ::close(fd);
  if (err != 0) return PosixError("test lock", path, err);
  return held;
}

}  // namespace agentkv
