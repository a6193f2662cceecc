#include "store/fault_file_system.h"

#include <algorithm>

namespace agentkv {

class FaultInjectingFileSystem::Writer final : public WritableFile {
 public:
  Writer(FaultInjectingFileSystem* fs, std::string path, std::unique_ptr<WritableFile> base)
      : fs_(fs), path_(std::move(path)), base_(std::move(base)) {}

  Status Append(std::string_view data) override {
    AGENTKV_RETURN_IF_ERROR(fs_->Begin("append", path_));
    size_t fits = fs_->ReserveBytes(data.size());
    if (fits > 0) AGENTKV_RETURN_IF_ERROR(base_->Append(data.substr(0, fits)));
    if (fits < data.size()) return Status::IOError("write " + path_ + ": No space left on device");
    return Status::OK();
  }
  Status Sync() override {
    AGENTKV_RETURN_IF_ERROR(fs_->Begin("sync", path_));
    return base_->Sync();
  }
  Status Close() override {
    AGENTKV_RETURN_IF_ERROR(fs_->Begin("close", path_));
    return base_->Close();
  }

 private:
  FaultInjectingFileSystem* fs_;
  std::string path_;
  std::unique_ptr<WritableFile> base_;
};

void FaultInjectingFileSystem::FailOpAt(uint64_t n) {
  MutexLock l(&mu_);
  fail_at_ = n;
}

void FaultInjectingFileSystem::CrashAtOp(uint64_t n) {
  MutexLock l(&mu_);
  crash_at_ = n;
}

void FaultInjectingFileSystem::SetNoSpaceAfterBytes(uint64_t bytes) {
  MutexLock l(&mu_);
  no_space_after_ = bytes;
}

void FaultInjectingFileSystem::SetCapacityBytes(uint64_t bytes) {
  MutexLock l(&mu_);
  capacity_ = bytes;
}

void FaultInjectingFileSystem::FailOps(std::string op, std::string path_part) {
  MutexLock l(&mu_);
  fail_op_ = std::move(op);
  fail_path_part_ = std::move(path_part);
}

uint64_t FaultInjectingFileSystem::used_bytes() const {
  MutexLock l(&mu_);
  return used_;
}

void FaultInjectingFileSystem::ReleaseBytesOf(const std::string& path) {
  auto size = base_->FileSize(path);
  if (!size.ok()) return;
  MutexLock l(&mu_);
  used_ = used_ > *size ? used_ - *size : 0;
}

void FaultInjectingFileSystem::Reset() {
  MutexLock l(&mu_);
  ops_ = fail_at_ = crash_at_ = bytes_appended_ = used_ = 0;
  crashed_ = false;
  no_space_after_ = capacity_ = UINT64_MAX;
  fail_op_.clear();
  fail_path_part_.clear();
  log_.clear();
}

bool FaultInjectingFileSystem::crashed() const {
  MutexLock l(&mu_);
  return crashed_;
}

uint64_t FaultInjectingFileSystem::op_count() const {
  MutexLock l(&mu_);
  return ops_;
}

std::vector<std::string> FaultInjectingFileSystem::log() const {
  MutexLock l(&mu_);
  return log_;
}

size_t FaultInjectingFileSystem::CountOps(std::string_view op, std::string_view path_part) const {
  MutexLock l(&mu_);
  return static_cast<size_t>(std::count_if(log_.begin(), log_.end(), [&](const std::string& line) {
    return line.compare(0, op.size(), op) == 0 && line.size() > op.size() && line[op.size()] == ' ' &&
           line.find(path_part, op.size()) != std::string::npos;
  }));
}

Status FaultInjectingFileSystem::Begin(std::string_view op, const std::string& path) {
  MutexLock l(&mu_);
  ++ops_;
  log_.push_back(std::string(op) + " " + path);
  if (crash_at_ != 0 && ops_ >= crash_at_) crashed_ = true;
  if (crashed_) return Status::IOError(std::string(op) + " " + path + ": simulated crash");
  if (fail_at_ != 0 && ops_ == fail_at_) {
    return Status::IOError(std::string(op) + " " + path + ": injected I/O error");
  }
  if (!fail_op_.empty() && op == fail_op_ && path.find(fail_path_part_) != std::string::npos) {
    return Status::IOError(std::string(op) + " " + path + ": Input/output error");
  }
  return Status::OK();
}

size_t FaultInjectingFileSystem::ReserveBytes(size_t size) {
  MutexLock l(&mu_);
  uint64_t room = no_space_after_ > bytes_appended_ ? no_space_after_ - bytes_appended_ : 0;
  if (capacity_ != UINT64_MAX) room = std::min<uint64_t>(room, capacity_ > used_ ? capacity_ - used_ : 0);
  size_t fits = static_cast<size_t>(std::min<uint64_t>(room, size));
  bytes_appended_ += fits;
  used_ += fits;
  return fits;
}

Result<std::unique_ptr<WritableFile>> FaultInjectingFileSystem::NewWritableFile(const std::string& path) {
  AGENTKV_RETURN_IF_ERROR(Begin("create", path));
  AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> base, base_->NewWritableFile(path));
  return std::unique_ptr<WritableFile>(new Writer(this, path, std::move(base)));
}

Result<std::string> FaultInjectingFileSystem::ReadFile(const std::string& path) {
  AGENTKV_RETURN_IF_ERROR(Begin("read", path));
  return base_->ReadFile(path);
}

Result<std::string> FaultInjectingFileSystem::ReadRange(const std::string& path, uint64_t offset,
                                                        size_t n) {
  AGENTKV_RETURN_IF_ERROR(Begin("read", path));
  return base_->ReadRange(path, offset, n);
}

Result<uint64_t> FaultInjectingFileSystem::FileSize(const std::string& path) {
  AGENTKV_RETURN_IF_ERROR(Begin("stat", path));
  return base_->FileSize(path);
}

bool FaultInjectingFileSystem::Exists(const std::string& path) {
  // A failed existence check reads as "absent": callers then fail on the
  // following operation, which is what a dying disk does too.
  if (!Begin("exists", path).ok()) return false;
  return base_->Exists(path);
}

Status FaultInjectingFileSystem::RenameFile(const std::string& from, const std::string& to) {
  AGENTKV_RETURN_IF_ERROR(Begin("rename", from + " -> " + to));
  ReleaseBytesOf(to);
  return base_->RenameFile(from, to);
}

Status FaultInjectingFileSystem::RemoveFile(const std::string& path) {
  AGENTKV_RETURN_IF_ERROR(Begin("remove", path));
  ReleaseBytesOf(path);
  return base_->RemoveFile(path);
}

Result<std::vector<DirEntry>> FaultInjectingFileSystem::ListDir(const std::string& dir) {
  AGENTKV_RETURN_IF_ERROR(Begin("list", dir));
  return base_->ListDir(dir);
}

Status FaultInjectingFileSystem::CreateDirs(const std::string& dir) {
  AGENTKV_RETURN_IF_ERROR(Begin("mkdir", dir));
  return base_->CreateDirs(dir);
}

Status FaultInjectingFileSystem::RemoveDir(const std::string& dir) {
  AGENTKV_RETURN_IF_ERROR(Begin("rmdir", dir));
  return base_->RemoveDir(dir);
}

Status FaultInjectingFileSystem::SyncDir(const std::string& dir) {
  AGENTKV_RETURN_IF_ERROR(Begin("syncdir", dir));
  return base_->SyncDir(dir);
}

Result<std::unique_ptr<FileLock>> FaultInjectingFileSystem::LockFile(const std::string& path) {
  AGENTKV_RETURN_IF_ERROR(Begin("lock", path));
  return base_->LockFile(path);
}

Result<bool> FaultInjectingFileSystem::IsLockHeld(const std::string& path) {
  AGENTKV_RETURN_IF_ERROR(Begin("testlock", path));
  return base_->IsLockHeld(path);
}

}  // namespace agentkv
