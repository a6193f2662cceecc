#pragma once
// FileRemovals: the files AgentStore has already taken out of its index
// (blocks no agent names any more), waiting to be removed from disk without
// the store's lock. Its state is the queue; Run does the file work and says
// what failed, and the store, under its lock again, marks those namespaces
// dirty (AgentStore::RemovePendingFiles).
//
// Thread safety: none; the store guards its queue with its mutex. Run
// touches no queue (static), so it runs without that mutex.

#include <cstdint>
#include <string>
#include <vector>

#include "store/file_system.h"
#include "util/status.h"

namespace agentkv {

class FileRemovals {
 public:
  struct Removal {
    std::string ns;        // its namespace, marked dirty by the store if the removal fails
    std::string path;
    std::string sync_dir;  // fsynced after the removals ("": none), so that an erasure is durable
    bool block = false;    // a block file (counted in Outcome::blocks_removed)
  };
  struct Failure {
    std::string ns;
    std::string path;
    Status status;
    bool durable = false;  // the removal had a sync_dir (an erasure)
  };
  struct Outcome {
    uint32_t blocks_removed = 0;  // block files this run removed (not those already gone)
    std::vector<Failure> failures;
  };

  void Add(Removal r) { queue_.push_back(std::move(r)); }
  bool empty() const { return queue_.empty(); }
  // The queue, emptied, for Run.
  std::vector<Removal> Take() {
    std::vector<Removal> taken;
    taken.swap(queue_);
    return taken;
  }

  // Removes every file, then fsyncs each sync_dir once. A file already gone
  // is no failure (a rescan took it first); a removal fails if its file
  // could not be removed or, for an erasure, its directory not fsynced.
  static Outcome Run(FileSystem* fs, const std::vector<Removal>& removals);

 private:
  std::vector<Removal> queue_;
};

}  // namespace agentkv
