#pragma once
// Crash-safe write helpers on top of FileSystem (LevelDB SetCurrentFile, plus
// the directory fsync LevelDB issue #195 lacks).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/file_system.h"
#include "util/status.h"

namespace agentkv {

// Suffix of temporary files; Open() of a store deletes files ending with it.
inline constexpr std::string_view kTempSuffix = ".tmp";

// Whether `s` is a write refused for lack of room: ENOSPC ("No space left on
// device") or EDQUOT ("Disk quota exceeded"), as FileSystem implementations
// word them (strerror; FaultInjectingFileSystem's SetNoSpaceAfterBytes too).
bool IsNoSpace(const Status& s);

// Writes `data` to `path` + kTempSuffix, syncs it, closes it and renames it
// over `path`; then, if `sync_dir`, syncs the parent directory.
// Success: `path` holds exactly `data` (durably if `sync_dir`). Failure: `path`
// holds its old content or, only if the failure came after the rename, the
// new one; the temp file is removed on a best-effort basis. After a crash,
// `path` holds the old or the new content, never a mix.
Status WriteFileAtomically(FileSystem* fs, const std::string& path, std::string_view data,
                           bool sync_dir);

// Like WriteFileAtomically, but the content is a header followed by several
// pieces, appended without concatenating them first (block files are MBs).
Status WritePiecesAtomically(FileSystem* fs, const std::string& path,
                             const std::vector<std::string_view>& pieces, bool sync_dir);

// The steps of WritePiecesAtomically for content produced piece by piece
// (a pack file of many blocks, each encoded only when its turn comes):
// Open creates `path` + kTempSuffix; Append adds bytes; Commit syncs and
// closes it, renames it over `path`, then, if `sync_dir`, syncs the parent
// directory. Destroyed before a successful Commit's rename: the temp file is
// removed (best effort; Open() of a store removes leftovers). Errors name
// "write <path>". One thread at a time.
class AtomicFileWriter {
 public:
  static Result<std::unique_ptr<AtomicFileWriter>> Open(FileSystem* fs, std::string path);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();
  Status Append(std::string_view data);
  // REQUIRES: called at most once.
  Status Commit(bool sync_dir);
  uint64_t bytes_appended() const { return bytes_; }

 private:
  AtomicFileWriter(FileSystem* fs, std::string path, std::unique_ptr<WritableFile> file);
  FileSystem* const fs_;
  const std::string path_;
  std::unique_ptr<WritableFile> file_;
  uint64_t bytes_ = 0;
  bool renamed_ = false;
};

// mkdir -p `dir`, then fsyncs the parent of every directory from just below
// `durable_base` down to `dir` (top-down), so the whole chain survives a
// crash. Always syncs, even if the directories exist: a directory created by
// an earlier, failed attempt may not be durable yet.
// REQUIRES: `durable_base` is an ancestor of `dir` (or "" / "/"), and is
// itself durable (the caller's responsibility, e.g. an existing user dir).
Status CreateDirsDurably(FileSystem* fs, const std::string& dir, const std::string& durable_base);

}  // namespace agentkv
