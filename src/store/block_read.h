#pragma once
// Reading one block file from a FileSystem with its tensor data read straight
// into the decoded tensors (no whole-file buffer, no copy of the payload).

#include <string>

#include "store/block_file.h"
#include "store/file_system.h"
#include "util/status.h"

namespace agentkv {

// Reads and fully verifies the block file at `path` (the checks of
// DecodeBlockFile, block_file.h): its size, then its first kBlockHeadReadBytes
// (header and, usually, the start of the data), then the rest of the data
// section scattered into the tensors' buffers, then the checksum.
// Errors: the file system's (NotFound, IOError) as they come; bad bytes, or a
// file that changes size while it is read, are Corruption("block file: ...").
// Thread-safe if `fs` is.
Result<DecodedBlock> ReadBlockFile(FileSystem* fs, const std::string& path);

inline constexpr size_t kBlockHeadReadBytes = 64 << 10;

}  // namespace agentkv
