#pragma once
// Crash-safe write helpers on top of FileSystem (LevelDB SetCurrentFile, plus
// the directory fsync LevelDB issue #195 lacks).

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

// mkdir -p `dir`, then fsyncs the parent of every directory from just below
// `durable_base` down to `dir` (top-down), so the whole chain survives a
// crash. Always syncs, even if the directories exist: a directory created by
// an earlier, failed attempt may not be durable yet.
// REQUIRES: `durable_base` is an ancestor of `dir` (or "" / "/"), and is
// itself durable (the caller's responsibility, e.g. an existing user dir).
Status CreateDirsDurably(FileSystem* fs, const std::string& dir, const std::string& durable_base);

// SyncDir that treats a missing directory as nothing to sync. (Not Exists()
// + SyncDir(): a failed Exists() would silently skip a needed fsync.)
Status SyncDirIfPresent(FileSystem* fs, const std::string& dir);

}  // namespace agentkv
