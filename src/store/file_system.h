#pragma once
// FileSystem: the only way store/ touches files (LevelDB `Env` style).
//
// Implementations: PosixFileSystem (the real disk), MemFileSystem (tests;
// models what survives a crash) and FaultInjectingFileSystem (a wrapper that
// fails or "crashes" at a chosen operation).
//
// Paths are '/'-separated strings; no normalization is done ("a//b" and "a/b"
// are different strings to MemFileSystem). Callers build them with JoinPath.
//
// Durability contract (what a crash may lose), modelled by MemFileSystem:
//   - bytes appended to a WritableFile survive only after its Sync();
//   - a new, renamed or removed directory entry survives only after SyncDir()
//     of its parent directory (and that directory itself must be durable).
//
// Errors: NotFound when a named file/directory does not exist, IOError for
// anything the OS refuses (ENOSPC, EIO, ...). Messages name the operation and
// path.
//
// Thread safety: implementations are safe for concurrent calls on different
// paths; a WritableFile is used by one thread at a time.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace agentkv {

// A file being written from scratch. Destroying it without Close() closes it
// (errors lost).
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;
  // Makes all appended bytes durable (fsync).
  virtual Status Sync() = 0;
  // REQUIRES: not yet closed. No call is allowed after Close().
  virtual Status Close() = 0;
};

// An advisory lock on a file, held until this object is destroyed (LevelDB
// `FileLock`). Released by the OS when the process dies, also by kill -9.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

struct DirEntry {
  std::string name;  // base name, never "." or ".."
  bool is_dir = false;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Creates (readable and writable by the owner only, on disk) or truncates
  // `path`. REQUIRES: its parent directory exists. On disk a symlink at
  // `path` is never followed and another user's file is never truncated
  // (FailedPrecondition).
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // A fresh file at `path` for a write-then-rename: whatever entry is there
  // (a leftover temp file, a planted link) is removed first, never opened;
  // on disk the file is created exclusively (O_EXCL), owner-only. The
  // default (in-memory file systems and wrappers) is NewWritableFile.
  virtual Result<std::unique_ptr<WritableFile>> NewTempFile(const std::string& path) {
    return NewWritableFile(path);
  }
  // The whole file.
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  // Up to `n` bytes at `offset` (fewer at end of file; empty past it).
  virtual Result<std::string> ReadRange(const std::string& path, uint64_t offset, size_t n) = 0;
  // Reads the bytes at [offset, offset + total size of `pieces`) into
  // `pieces`, in order (a scatter read: block data goes straight into its
  // tensors). Returns how many bytes were read: fewer only at end of file.
  // The default reads the range with ReadRange and copies it (so wrappers
  // that override ReadRange see these reads too); PosixFileSystem reads in place.
  virtual Result<size_t> ReadScattered(const std::string& path, uint64_t offset,
                                       std::span<const std::span<uint8_t>> pieces);
  virtual Result<uint64_t> FileSize(const std::string& path) = 0;
  // True for files and directories.
  virtual bool Exists(const std::string& path) = 0;
  // Atomically replaces `to` (a file) if it exists.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // Entries in no particular order. NotFound if `dir` does not exist.
  virtual Result<std::vector<DirEntry>> ListDir(const std::string& dir) = 0;
  // mkdir -p, new directories owner-only (0700 on disk). OK if it already exists.
  virtual Status CreateDirs(const std::string& dir) = 0;
  // OK if `dir` may hold cache files: on disk, a real directory (not a
  // symlink) owned by this process's user and not writable by group or
  // others; FailedPrecondition (saying why and what to do) otherwise;
  // NotFound if it does not exist. The default (in-memory) accepts any
  // existing directory.
  virtual Status CheckPrivateDir(const std::string& dir) {
    return Exists(dir) ? Status::OK() : Status::NotFound("check dir " + dir + ": not found");
  }
  // Removes an empty directory.
  virtual Status RemoveDir(const std::string& dir) = 0;
  // Makes the directory's entries (creations, renames, removals) durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  // Creates `path` if needed and takes an exclusive lock on it without
  // waiting, held until the returned object is destroyed. Two locks on one
  // path exclude each other whether they are taken by two processes or twice
  // in one process. FailedPrecondition if someone holds it; IOError if the
  // file cannot be created or locked. REQUIRES: the parent directory exists.
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) = 0;
  // Whether someone holds the lock on `path` now (false if the file does not
  // exist). Takes no lock itself. IOError if it cannot tell.
  virtual Result<bool> IsLockHeld(const std::string& path) = 0;
  // Whether ReadFile may be called from several threads at once (the store
  // then reads block files ahead in parallel). Test file systems that count
  // or order operations keep the default: one thread, deterministic order.
  virtual bool ConcurrentReads() const { return false; }
};

// A process-wide PosixFileSystem (stateless, so sharing it is harmless).
FileSystem* DefaultFileSystem();

// Which threads may touch the disk (the rule of docs/architecture.md: the
// inference thread never waits on I/O). A thread that must not do file I/O
// calls ForbidFileAccessOnThisThread(true) once; every FileSystem
// implementation calls NoteFileAccess() on entry to each operation, which
// counts (and logs, once per thread) any access from a forbidden thread.
// Tests assert ForbiddenFileAccesses() stays 0. Any thread; lock-free.
void ForbidFileAccessOnThisThread(bool forbid);
void NoteFileAccess(const char* op, const std::string& path);
uint64_t ForbiddenFileAccesses();

// "a" + "b" -> "a/b"; an empty side yields the other.
std::string JoinPath(std::string_view a, std::string_view b);
// "a/b/c" -> "a/b"; "/a" -> "/"; "a" -> "".
std::string ParentDir(std::string_view path);
// "a/b/c" -> "c".
std::string BaseName(std::string_view path);

}  // namespace agentkv
