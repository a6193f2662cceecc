#include "store/durable_io.h"

#include <memory>

namespace agentkv {

bool IsNoSpace(const Status& s) {
  if (s.code() != StatusCode::kIOError) return false;
  const std::string& m = s.message();
  return m.find("No space left on device") != std::string::npos || m.find("Disk quota exceeded") != std::string::npos;
}

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Open(FileSystem* fs, std::string path) {
  auto file = fs->NewWritableFile(path + std::string(kTempSuffix));
  if (!file.ok()) return file.status().WithContext("write " + path);
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(fs, std::move(path), std::move(file).value()));
}

AtomicFileWriter::AtomicFileWriter(FileSystem* fs, std::string path, std::unique_ptr<WritableFile> file)
    : fs_(fs), path_(std::move(path)), file_(std::move(file)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (renamed_) return;
  file_.reset();
  (void)fs_->RemoveFile(path_ + std::string(kTempSuffix));  // best effort; Open() removes leftovers
}

Status AtomicFileWriter::Append(std::string_view data) {
  if (data.empty()) return Status::OK();
  bytes_ += data.size();
  return file_->Append(data).WithContext("write " + path_);
}

Status AtomicFileWriter::Commit(bool sync_dir) {
  Status st = file_->Sync();
  if (st.ok()) st = file_->Close();
  file_.reset();
  if (st.ok()) st = fs_->RenameFile(path_ + std::string(kTempSuffix), path_);
  if (!st.ok()) return st.WithContext("write " + path_);
  renamed_ = true;
  // Without this the rename may not survive a crash (LevelDB issue #195).
  if (sync_dir) AGENTKV_RETURN_IF_ERROR(fs_->SyncDir(ParentDir(path_)).WithContext("write " + path_));
  return Status::OK();
}

Status WritePiecesAtomically(FileSystem* fs, const std::string& path,
                             const std::vector<std::string_view>& pieces, bool sync_dir) {
  AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer, AtomicFileWriter::Open(fs, path));
  for (std::string_view piece : pieces) AGENTKV_RETURN_IF_ERROR(writer->Append(piece));
  return writer->Commit(sync_dir);
}

Status WriteFileAtomically(FileSystem* fs, const std::string& path, std::string_view data,
                           bool sync_dir) {
  return WritePiecesAtomically(fs, path, {data}, sync_dir);
}

Status CreateDirsDurably(FileSystem* fs, const std::string& dir, const std::string& durable_base) {
  std::vector<std::string> chain;  // dir, its parent, ... up to below durable_base
  for (std::string p = dir; !p.empty() && p != "/" && p != durable_base; p = ParentDir(p)) chain.push_back(p);
  AGENTKV_RETURN_IF_ERROR(fs->CreateDirs(dir).WithContext("create " + dir));
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    std::string parent = ParentDir(*it);
    AGENTKV_RETURN_IF_ERROR(fs->SyncDir(parent.empty() ? "." : parent).WithContext("create " + dir));
  }
  return Status::OK();
}

}  // namespace agentkv
