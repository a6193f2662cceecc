#include "store/file_system.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "util/log.h"

namespace agentkv {
namespace {

thread_local bool t_file_access_forbidden = false;
thread_local bool t_file_access_logged = false;
std::atomic<uint64_t> g_forbidden_file_accesses{0};

}  // namespace

void ForbidFileAccessOnThisThread(bool forbid) { t_file_access_forbidden = forbid; }

void NoteFileAccess(const char* op, const std::string& path) {
  if (!t_file_access_forbidden) return;
  g_forbidden_file_accesses.fetch_add(1, std::memory_order_relaxed);
  if (!t_file_access_logged) {
    t_file_access_logged = true;
    AKV_LOG_ERROR("file access on a thread that must not wait on the disk: %s %s", op, path.c_str());
  }
}

Result<size_t> FileSystem::ReadScattered(const std::string& path, uint64_t offset,
                                         std::span<const std::span<uint8_t>> pieces) {
  size_t total = 0;
  for (auto piece : pieces) total += piece.size();
  AGENTKV_ASSIGN_OR_RETURN(std::string bytes, ReadRange(path, offset, total));
  size_t at = 0;
  for (auto piece : pieces) {
    const size_t n = std::min(piece.size(), bytes.size() - at);
    if (n > 0) std::memcpy(piece.data(), bytes.data() + at, n);
    at += n;
  }
  return bytes.size();
}

uint64_t ForbiddenFileAccesses() { return g_forbidden_file_accesses.load(std::memory_order_relaxed); }

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  std::string out(a);
  if (out.back() != '/') out += '/';
  out += b;
  return out;
}

std::string ParentDir(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return "";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace agentkv
