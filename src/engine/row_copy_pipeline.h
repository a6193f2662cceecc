#pragma once
// RowCopyPipeline: writes a BlocksStateWriter's rows on worker threads while
// another thread already reads the state (llama.cpp's reader, through
// llama_state_seq_set_data_wait), so that a restore's host-side copy and its
// copy to the device overlap instead of running one after the other.
//
// Rows are handed to the workers in buffer order (the order llama.cpp reads
// them in); WaitReady blocks until every row copy overlapping a byte range has
// finished. Thread safety: WaitReady may be called from any thread; the
// destructor waits for every copy, so the writer's buffer is complete (and no
// worker touches it) once the pipeline is gone. The workers are the creating
// thread's WorkerTeam (util/parallel.h): that thread must not call
// ParallelFor while the pipeline lives.

#include <cstddef>
#include <functional>
#include <vector>

#include "engine/seq_state.h"
#include "util/mutex.h"
#include "util/parallel.h"

namespace agentkv::engine {

class RowCopyPipeline {
 public:
  // Starts n_threads (>= 1) workers over writer's rows. `writer` must outlive
  // the pipeline and its headers must be written (BlocksStateWriter::Start).
  RowCopyPipeline(const BlocksStateWriter& writer, int n_threads);
  ~RowCopyPipeline();
  RowCopyPipeline(const RowCopyPipeline&) = delete;
  RowCopyPipeline& operator=(const RowCopyPipeline&) = delete;

  // Returns once bytes [offset, offset + size) of the state hold their final
  // values (at once for header bytes, which Start wrote).
  void WaitReady(size_t offset, size_t size);
  // llama_state_wait_fn over a RowCopyPipeline* `self`.
  static void WaitFn(void* self, size_t offset, size_t size);

 private:
  void Work();

  const BlocksStateWriter& writer_;
  size_t next_ GUARDED_BY(mu_) = 0;  // the next row copy to hand out
  std::vector<bool> done_ GUARDED_BY(mu_);
  Mutex mu_;
  CondVar cv_;  // a row copy finished
  const std::function<void(size_t)> work_;  // what each worker runs: Work()
  WorkerTeam& team_;
};

}  // namespace agentkv::engine
