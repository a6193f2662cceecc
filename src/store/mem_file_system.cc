#include "store/mem_file_system.h"

#include <algorithm>

namespace agentkv {
namespace {

bool IsRoot(const std::string& p) { return p.empty() || p == "/"; }

// Ancestors of `path`, nearest first, excluding the root.
std::vector<std::string> Ancestors(const std::string& path) {
  std::vector<std::string> out;
  for (std::string p = ParentDir(path); !IsRoot(p); p = ParentDir(p)) out.push_back(p);
  return out;
}

}  // namespace

class MemFileSystem::Writer final : public WritableFile {
 public:
  Writer(MemFileSystem* fs, std::shared_ptr<File> file) : fs_(fs), file_(std::move(file)) {}
  Status Append(std::string_view data) override {
    MutexLock l(&fs_->mu_);
    file_->data.append(data);
    return Status::OK();
  }
  Status Sync() override {
    MutexLock l(&fs_->mu_);
    file_->synced = file_->data;
    return Status::OK();
  }
  Status Close() override { return Status::OK(); }

 private:
  MemFileSystem* fs_;
  std::shared_ptr<File> file_;
};

class MemFileSystem::Lock final : public FileLock {
 public:
  Lock(MemFileSystem* fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  ~Lock() override {
    MutexLock l(&fs_->mu_);
    fs_->locked_.erase(path_);
  }

 private:
  MemFileSystem* fs_;
  std::string path_;
};

std::string MemFileSystem::Norm(const std::string& path) {
  NoteFileAccess("mem", path);  // every operation normalizes its paths first
  if (path == ".") return "";
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

bool MemFileSystem::IsDirLocked(const std::string& path) const {
  return IsRoot(path) || dirs_.count(path) > 0;
}

Result<std::unique_ptr<WritableFile>> MemFileSystem::NewWritableFile(const std::string& path_in) {
  std::string path = Norm(path_in);
  MutexLock l(&mu_);
  if (!IsDirLocked(ParentDir(path))) return Status::NotFound("create " + path + ": no parent directory");
  if (IsDirLocked(path)) return Status::IOError("create " + path + ": is a directory");
  auto& slot = files_[path];
  if (slot) {
    slot->data.clear();  // O_TRUNC on the same inode; synced bytes stay until Sync
  } else {
    slot = std::make_shared<File>();
  }
  return std::unique_ptr<WritableFile>(new Writer(this, slot));
}

Result<std::string> MemFileSystem::ReadFile(const std::string& path_in) {
  std::string path = Norm(path_in);
  MutexLock l(&mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("read " + path + ": no such file");
  return it->second->data;
}

Result<std::string> MemFileSystem::ReadRange(const std::string& path_in, uint64_t offset, size_t n) {
  std::string path = Norm(path_in);
  MutexLock l(&mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("read " + path + ": no such file");
  const std::string& d = it->second->data;
  if (offset >= d.size()) return std::string();
  return d.substr(static_cast<size_t>(offset), n);
}

Result<uint64_t> MemFileSystem::FileSize(const std::string& path_in) {
  std::string path = Norm(path_in);
  MutexLock l(&mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("stat " + path + ": no such file");
  return static_cast<uint64_t>(it->second->data.size());
}

bool MemFileSystem::Exists(const std::string& path_in) {
  std::string path = Norm(path_in);
  MutexLock l(&mu_);
  return files_.count(path) > 0 || IsDirLocked(path);
}

Status MemFileSystem::RenameFile(const std::string& from_in, const std::string& to_in) {
  std::string from = Norm(from_in), to = Norm(to_in);
  MutexLock l(&mu_);
  auto it = files_.find(from);
  if (it == files_.end()) return Status::NotFound("rename " + from + ": no such file");
  if (!IsDirLocked(ParentDir(to))) return Status::NotFound("rename to " + to + ": no parent directory");
  if (IsDirLocked(to)) return Status::IOError("rename to " + to + ": is a directory");
  if (from == to) return Status::OK();
  std::shared_ptr<File> f = it->second;
  files_.erase(it);
  files_[to] = std::move(f);
  return Status::OK();
}

Status MemFileSystem::RemoveFile(const std::string& path_in) {
  std::string path = Norm(path_in);
  MutexLock l(&mu_);
  if (files_.erase(path) == 0) return Status::NotFound("unlink " + path + ": no such file");
  return Status::OK();
}

Result<std::vector<DirEntry>> MemFileSystem::ListDir(const std::string& dir_in) {
  std::string dir = Norm(dir_in);
  MutexLock l(&mu_);
  if (!IsDirLocked(dir)) return Status::NotFound("opendir " + dir + ": no such directory");
  std::vector<DirEntry> out;
  for (const auto& [p, f] : files_) {
    if (ParentDir(p) == dir) out.push_back({BaseName(p), false});
  }
  for (const auto& p : dirs_) {
    if (ParentDir(p) == dir) out.push_back({BaseName(p), true});
  }
  return out;
}

Status MemFileSystem::CreateDirs(const std::string& dir_in) {
  std::string dir = Norm(dir_in);
  MutexLock l(&mu_);
  std::vector<std::string> chain = Ancestors(dir);
  std::reverse(chain.begin(), chain.end());
  if (!IsRoot(dir)) chain.push_back(dir);
  for (const auto& p : chain) {
    if (files_.count(p)) return Status::IOError("mkdir " + p + ": exists and is not a directory");
    dirs_.insert(p);
  }
  return Status::OK();
}

Status MemFileSystem::RemoveDir(const std::string& dir_in) {
  std::string dir = Norm(dir_in);
  MutexLock l(&mu_);
  if (!dirs_.count(dir)) return Status::NotFound("rmdir " + dir + ": no such directory");
  for (const auto& [p, f] : files_) {
    if (ParentDir(p) == dir) return Status::IOError("rmdir " + dir + ": not empty");
  }
  for (const auto& p : dirs_) {
    if (ParentDir(p) == dir) return Status::IOError("rmdir " + dir + ": not empty");
  }
  dirs_.erase(dir);
  return Status::OK();
}

Status MemFileSystem::SyncDir(const std::string& dir_in) {
  std::string dir = Norm(dir_in);
  MutexLock l(&mu_);
  if (!IsDirLocked(dir)) return Status::NotFound("fsync dir " + dir + ": no such directory");
  for (auto it = durable_files_.begin(); it != durable_files_.end();) {
    it = ParentDir(it->first) == dir ? durable_files_.erase(it) : std::next(it);
  }
  for (auto it = durable_dirs_.begin(); it != durable_dirs_.end();) {
    it = ParentDir(*it) == dir ? durable_dirs_.erase(it) : std::next(it);
  }
  for (const auto& [p, f] : files_) {
    if (ParentDir(p) == dir) durable_files_[p] = f;
  }
  for (const auto& p : dirs_) {
    if (ParentDir(p) == dir) durable_dirs_.insert(p);
  }
  return Status::OK();
}

Result<std::unique_ptr<FileLock>> MemFileSystem::LockFile(const std::string& path_in) {
  std::string path = Norm(path_in);
  MutexLock l(&mu_);
  if (!IsDirLocked(ParentDir(path))) return Status::NotFound("create lock file " + path + ": no parent directory");
  if (IsDirLocked(path)) return Status::IOError("create lock file " + path + ": is a directory");
  if (locked_.count(path)) return Status::FailedPrecondition("lock " + path + ": held by another process");
  if (!files_.count(path)) files_[path] = std::make_shared<File>();
  locked_.insert(path);
  return std::unique_ptr<FileLock>(new Lock(this, path));
}

Result<bool> MemFileSystem::IsLockHeld(const std::string& path_in) {
  std::string path = Norm(path_in);
  MutexLock l(&mu_);
  return locked_.count(path) > 0;
}

void MemFileSystem::SimulateCrash() {
  MutexLock l(&mu_);
  auto reachable = [&](const std::string& p) REQUIRES(mu_) {
    for (const auto& a : Ancestors(p)) {
      if (!durable_dirs_.count(a)) return false;
    }
    return true;
  };
  std::set<std::string> dirs;
  for (const auto& d : durable_dirs_) {
    if (reachable(d)) dirs.insert(d);
  }
  std::map<std::string, std::shared_ptr<File>> files;
  for (const auto& [p, f] : durable_files_) {
    if (!reachable(p)) continue;
    // A fresh object: handles opened before the crash no longer reach it.
    files[p] = std::make_shared<File>(File{f->synced, f->synced});
  }
  dirs_ = dirs;
  durable_dirs_ = std::move(dirs);
  files_ = files;
  durable_files_ = std::move(files);
}

Status MemFileSystem::CorruptFile(const std::string& path_in, const std::string& new_bytes) {
  std::string path = Norm(path_in);
  MutexLock l(&mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("corrupt " + path + ": no such file");
  it->second->data = new_bytes;
  it->second->synced = new_bytes;
  return Status::OK();
}

std::vector<std::string> MemFileSystem::AllFiles() {
  MutexLock l(&mu_);
  std::vector<std::string> out;
  for (const auto& [p, f] : files_) out.push_back(p);
  return out;
}

}  // namespace agentkv
