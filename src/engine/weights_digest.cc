#include "engine/weights_digest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <vector>

#include "util/hash.h"
#include "util/log.h"
#include "util/private_path.h"

namespace agentkv::engine {
namespace {

constexpr char kCacheFormat[] = "agentkv.weights-digest.v1";

// What identifies one version of a file's bytes, as far as stat can tell.
struct Stamp {
  uint64_t size = 0, inode = 0, dev = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const Stamp&) const = default;
};

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError("model digest: " + what + " " + path + ": " + std::strerror(errno));
}

Stamp FromStat(const struct stat& st) {
  Stamp s;
  s.size = static_cast<uint64_t>(st.st_size);
  s.inode = static_cast<uint64_t>(st.st_ino);
  s.dev = static_cast<uint64_t>(st.st_dev);
  s.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  s.ctime_ns = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  return s;
}

// The cache entry's text: the key fields, then the digest.
std::string EntryText(const std::string& path, const Stamp& s, uint64_t data_begin, uint64_t xxh3) {
  std::ostringstream o;
  o << kCacheFormat << "\npath=" << path << "\nsize=" << s.size << "\nmtime_ns=" << s.mtime_ns
    << "\nctime_ns=" << s.ctime_ns << "\ninode=" << s.inode << "\ndev=" << s.dev << "\ndata_begin=" << data_begin
    << "\nxxh3=" << Hex64(xxh3) << "\n";
  return o.str();
}

std::string EntryPath(const std::string& cache_dir, const std::string& path) {
  return cache_dir + "/" + Sha256Hex(path).substr(0, 32) + ".digest";
}

// The whole file, or "" if it cannot be read. O_NOFOLLOW: a link planted
// as an entry is not read through.
std::string ReadEntry(const std::string& entry_path) {
  const int fd = ::open(entry_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || text.size() > (64u << 10)) break;  // an entry is ~300 bytes
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// The cached digest if the entry exists and names exactly this file version.
// REQUIRES: the cache dir passed CheckPrivateDir (else anyone who can write
// there could make us trust an edited model).
bool LookUp(const std::string& entry_path, const std::string& path, const Stamp& s, uint64_t data_begin,
            uint64_t* xxh3) {
  const std::string text = ReadEntry(entry_path);
  const size_t at = text.rfind("\nxxh3=");
  if (at == std::string::npos || text.size() != at + 6 + 16 + 1) return false;
  const std::string hex = text.substr(at + 6, 16);
  uint64_t v = std::strtoull(hex.c_str(), nullptr, 16);
  if (Hex64(v) != hex) return false;
  // The whole entry must be what this file version would write: any other
  // path, size, time, inode, device, offset or a torn file is a miss.
  if (text != EntryText(path, s, data_begin, v)) return false;
  *xxh3 = v;
  return true;
}

// Whether the cache dir may be used: created owner-only if missing (its
// parents too: it usually sits in the KV cache dir, which must not end up
// 0755 or 0777 because the digest ran first), then checked like the KV
// cache's directories. Logged when not.
bool UsableCacheDir(const std::string& cache_dir) {
  Status st = CreatePrivateDirs(cache_dir);
  if (st.ok()) st = CheckPrivateDir(cache_dir);
  if (!st.ok()) AKV_LOG_WARN("model digest: not using the cache %s: %s", cache_dir.c_str(), st.ToString().c_str());
  return st.ok();
}

// Writes the entry to a fresh temp file (O_EXCL, owner-only) and renames it
// over the entry.
void Store(const std::string& entry_path, const std::string& text) {
  const std::string tmp = entry_path + ".tmp." + std::to_string(::getpid());
  auto fd = OpenPrivateFile(tmp, /*exclusive=*/true);
  if (!fd.ok()) {
    AKV_LOG_WARN("model digest: cannot write %s: %s", tmp.c_str(), fd.status().ToString().c_str());
    return;
  }
  bool ok = true;
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(*fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ::close(*fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), entry_path.c_str()) != 0) {
    AKV_LOG_WARN("model digest: cannot write %s: %s", entry_path.c_str(), std::strerror(errno));
    ::unlink(tmp.c_str());
  }
}

int64_t SystemNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<WeightsDigest> DigestWeights(const std::string& path_in, uint64_t data_begin,
                                    const WeightsDigestOptions& options) {
  std::error_code ec;
  const std::string path = std::filesystem::weakly_canonical(path_in, ec).string();
  if (ec) return Status::IOError("model digest: " + path_in + ": " + ec.message());
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return Errno("stat", path);
  const Stamp before = FromStat(st);
  if (data_begin > before.size) {
    return Status::InvalidArgument("model digest: " + path + ": data offset " + std::to_string(data_begin) +
                                   " is past the end (" + std::to_string(before.size) + " bytes)");
  }
  const std::string entry =
      options.cache_dir.empty() || !UsableCacheDir(options.cache_dir) ? "" : EntryPath(options.cache_dir, path);
  WeightsDigest out;
  if (!entry.empty() && LookUp(entry, path, before, data_begin, &out.xxh3)) {
    out.from_cache = true;
    return out;
  }

  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  Xxh3Stream h;
  std::vector<char> buf(8u << 20);
  uint64_t at = data_begin;
  while (at < before.size) {
    const ssize_t n = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), before.size - at), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("read", path);
    if (n == 0) break;  // shrank: caught by the stat below
    h.Update(buf.data(), static_cast<size_t>(n));
    at += static_cast<uint64_t>(n);
  }
  out.xxh3 = h.Digest();
  out.bytes_hashed = at - data_begin;
  if (::fstat(fd, &st) != 0) return Errno("stat", path);
  if (!(FromStat(st) == before) || at != before.size) {
    return Status::IOError("model digest: " + path + " changed while it was read; try again");
  }
  const int64_t now = options.now_ns ? options.now_ns() : SystemNowNs();
  const bool racy = now - std::max(before.mtime_ns, before.ctime_ns) < kRacyWindowNs;
  if (!entry.empty() && !racy) Store(entry, EntryText(path, before, data_begin, out.xxh3));
  return out;
}

}  // namespace agentkv::engine
