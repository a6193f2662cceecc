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
#include <fstream>
#include <sstream>
#include <vector>

#include "util/hash.h"
#include "util/log.h"

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

// The cached digest if the entry exists and names exactly this file version.
bool LookUp(const std::string& entry_path, const std::string& path, const Stamp& s, uint64_t data_begin,
            uint64_t* xxh3) {
  std::ifstream f(entry_path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
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

void Store(const std::string& cache_dir, const std::string& entry_path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  if (ec) {
    AKV_LOG_WARN("model digest: cannot create %s: %s", cache_dir.c_str(), ec.message().c_str());
    return;
  }
  std::filesystem::permissions(cache_dir, std::filesystem::perms::owner_all, ec);
  const std::string tmp = entry_path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) {
      AKV_LOG_WARN("model digest: cannot write %s", tmp.c_str());
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::permissions(tmp, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  std::filesystem::rename(tmp, entry_path, ec);
  if (ec) {
    AKV_LOG_WARN("model digest: cannot rename %s: %s", tmp.c_str(), ec.message().c_str());
    std::filesystem::remove(tmp, ec);
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
  const std::string entry = options.cache_dir.empty() ? "" : EntryPath(options.cache_dir, path);
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
  if (!entry.empty() && !racy) Store(options.cache_dir, entry, EntryText(path, before, data_begin, out.xxh3));
  return out;
}

}  // namespace agentkv::engine
