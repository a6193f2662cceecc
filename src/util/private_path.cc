#include "util/private_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace agentkv {
namespace {

Status Errno(const char* op, const std::string& path, int err) {
  std::string msg = std::string(op) + " " + path + ": " + std::strerror(err);
  if (err == ENOENT) return Status::NotFound(std::move(msg));
  if (err == ELOOP) return Status::FailedPrecondition(std::move(msg) + " (a symlink where a file of ours goes)");
  return Status::IOError(std::move(msg));
}

std::string Octal(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

std::string Parent(const std::string& p) {
  const size_t slash = p.find_last_of('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

// Sets a directory we just created to kPrivateDirMode, refusing a symlink.
Status FixDirMode(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Errno("open new dir", dir, errno);
  struct stat st;
  int rc = ::fstat(fd, &st);
  if (rc == 0 && st.st_uid != ::geteuid()) {
    ::close(fd);
    return Status::FailedPrecondition("mkdir " + dir + ": appeared owned by uid " + std::to_string(st.st_uid));
  }
  if (rc == 0) rc = ::fchmod(fd, kPrivateDirMode);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Errno("chmod", dir, err);
  return Status::OK();
}

}  // namespace

Status CheckPrivateDir(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return Errno("stat", dir, errno);
  if (S_ISLNK(st.st_mode)) {
    return Status::FailedPrecondition(dir + " is a symlink; a cache directory must be a real directory (give its target)");
  }
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(dir + " is not a directory");
  if (st.st_uid != ::geteuid()) {
    return Status::FailedPrecondition(dir + " is owned by uid " + std::to_string(st.st_uid) + ", not by this process (uid " +
                                      std::to_string(::geteuid()) +
                                      "): another user could read or plant cache files; chown it or use another dir");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::FailedPrecondition(dir + " has mode " + Octal(st.st_mode) +
                                      ": group or others may write in it (they could plant links or files); "
                                      "chmod 700 it or use another dir");
  }
  return Status::OK();
}

Status CreatePrivateDirs(const std::string& dir) {
  if (dir.empty()) return Status::OK();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::OK();
    return Status::IOError("mkdir " + dir + ": exists and is not a directory");
  }
  const std::string parent = Parent(dir);
  if (!parent.empty() && parent != dir) AGENTKV_RETURN_IF_ERROR(CreatePrivateDirs(parent));
  if (::mkdir(dir.c_str(), kPrivateDirMode) != 0) {
    if (errno != EEXIST) return Errno("mkdir", dir, errno);
    // Someone made it meanwhile: fine if it is a real directory of ours.
    Status st_check = CheckPrivateDir(dir);
    return st_check.ok() ? Status::OK() : Status::IOError("mkdir " + dir + ": " + st_check.message());
  }
  return FixDirMode(dir);
}

Result<int> OpenPrivateFile(const std::string& path, bool exclusive) {
  if (exclusive) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("unlink", path, errno);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kPrivateFileMode);
    if (fd < 0) return Errno("create", path, errno);
    if (::fchmod(fd, kPrivateFileMode) != 0) {  // the umask may have taken bits away
      const int err = errno;
      ::close(fd);
      return Errno("chmod", path, err);
    }
    return fd;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) return Errno("create", path, errno);
  struct stat st;
  Status bad;
  if (::fstat(fd, &st) != 0) {
    bad = Errno("stat", path, errno);
  } else if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || st.st_nlink != 1) {
    bad = Status::FailedPrecondition("create " + path + ": exists and is not a regular file of ours with one link");
  } else if (::ftruncate(fd, 0) != 0) {
    bad = Errno("truncate", path, errno);
  } else if (::fchmod(fd, kPrivateFileMode) != 0) {
    bad = Errno("chmod", path, errno);
  }
  if (!bad.ok()) {
    ::close(fd);
    return bad;
  }
  return fd;
}

}  // namespace agentkv
