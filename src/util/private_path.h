#pragma once
// Owner-only files and directories on the real disk, safe against another
// local user who can plant symlinks, files or directories where we write.
// (Cache files hold every tenant's conversation text; docs/store-format.md,
// "Permissions".) Used by store/posix_file_system.cc and the model digest
// cache; nothing else should call these directly.
//
// Thread safety: stateless functions. Not for MemFileSystem paths.

#include <string>
#include <sys/types.h>

#include "util/status.h"

namespace agentkv {

// Exact modes, whatever the process umask.
inline constexpr mode_t kPrivateDirMode = 0700;
inline constexpr mode_t kPrivateFileMode = 0600;

// OK if `dir` is a directory, not a symlink, owned by this process's
// effective user, with no write bit for group or others. NotFound if it does
// not exist; FailedPrecondition (naming the path, its owner or mode and the
// fix) for a symlink, another owner or a group/world-writable directory;
// IOError if it cannot be inspected.
Status CheckPrivateDir(const std::string& dir);

// mkdir -p `dir`. Each directory it creates is created and then set to
// kPrivateDirMode exactly, through a descriptor opened with O_NOFOLLOW, so
// an entry that another user planted where a directory goes (a symlink) is
// an error, never followed. Existing directories are accepted as they are
// (they may be the user's own ancestors such as $HOME; CheckPrivateDir is
// the check for those inside a cache). IOError on failure.
Status CreatePrivateDirs(const std::string& dir);

// Opens `path` write-only with kPrivateFileMode exactly and returns the
// descriptor (the caller closes it).
// exclusive: whatever entry is at `path` (a leftover temp file, a planted
//   symlink) is unlinked first, never opened, and the file is created with
//   O_CREAT | O_EXCL | O_NOFOLLOW.
// !exclusive: creates or opens with O_NOFOLLOW and truncates only after
//   checking it is a regular file owned by us with one link.
// FailedPrecondition if `path` is a symlink or a file we must not write;
// NotFound if the parent is missing; IOError otherwise.
Result<int> OpenPrivateFile(const std::string& path, bool exclusive);

}  // namespace agentkv
