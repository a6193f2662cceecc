#include "store/file_removals.h"

#include <map>

#include "store/durable_io.h"

namespace agentkv {

FileRemovals::Outcome FileRemovals::Run(FileSystem* fs, const std::vector<Removal>& removals) {
  std::vector<Status> removed;
  removed.reserve(removals.size());
  std::map<std::string, Status> synced;  // each directory to fsync once, after its removals
  for (const Removal& r : removals) {
    removed.push_back(fs->RemoveFile(r.path));
    if (!r.sync_dir.empty()) synced.emplace(r.sync_dir, Status::OK());
  }
  for (auto& [dir, st] : synced) st = SyncDirIfPresent(fs, dir);
  Outcome out;
  for (size_t i = 0; i < removals.size(); ++i) {
    const Removal& r = removals[i];
    Status st = removed[i].code() == StatusCode::kNotFound ? Status::OK() : removed[i];  // a rescan took it first
    if (st.ok() && !r.sync_dir.empty()) st = synced[r.sync_dir];
    if (st.ok()) {
      out.blocks_removed += removed[i].ok() && r.block;
      continue;
    }
    out.failures.push_back({r.ns, r.path, st, !r.sync_dir.empty()});
  }
  return out;
}

}  // namespace agentkv
