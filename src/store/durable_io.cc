#include "store/durable_io.h"

#include <memory>

namespace agentkv {

bool IsNoSpace(const Status& s) {
  if (s.code() != StatusCode::kIOError) return false;
  const std::string& m = s.message();
  return m.find("No space left on device") != std::string::npos || m.find("Disk quota exceeded") != std::string::npos;
}

Status WritePiecesAtomically(FileSystem* fs, const std::string& path,
                             const std::vector<std::string_view>& pieces, bool sync_dir) {
  const std::string tmp = path + std::string(kTempSuffix);
  auto write_tmp = [&]() -> Status {
    AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs->NewTempFile(tmp));
    for (std::string_view piece : pieces) {
      if (piece.empty()) continue;
      AGENTKV_RETURN_IF_ERROR(file->Append(piece));
    }
    AGENTKV_RETURN_IF_ERROR(file->Sync());
    return file->Close();
  };
  Status st = write_tmp();
  if (st.ok()) st = fs->RenameFile(tmp, path);
  if (!st.ok()) {
    (void)fs->RemoveFile(tmp);  // best effort; Open() removes leftovers
    return st.WithContext("write " + path);
  }
  if (sync_dir) {
    // Without this the rename may not survive a crash (LevelDB issue #195).
    AGENTKV_RETURN_IF_ERROR(fs->SyncDir(ParentDir(path)).WithContext("write " + path));
  }
  return Status::OK();
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

Status SyncDirIfPresent(FileSystem* fs, const std::string& dir) {
  Status st = fs->SyncDir(dir);
  return st.code() == StatusCode::kNotFound ? Status::OK() : st;
}

}  // namespace agentkv
