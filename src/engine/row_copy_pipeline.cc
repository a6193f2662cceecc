#include "engine/row_copy_pipeline.h"

#include <algorithm>


namespace agentkv::engine {

RowCopyPipeline::RowCopyPipeline(const BlocksStateWriter& writer, int n_threads)
    : writer_(writer), done_(writer.n_row_copies(), false), work_([this](size_t) { Work(); }),
      team_(WorkerTeam::ForThisThread()) {
  // Workers run on any process CPU, not the inference thread's one (WorkerTeam).
  team_.Launch(std::min<size_t>(std::max(n_threads, 1), writer.n_row_copies()), &work_);
}

RowCopyPipeline::~RowCopyPipeline() { team_.Wait(); }

void RowCopyPipeline::Work() {
  for (;;) {
    size_t i;
    {
      MutexLock lock(&mu_);
      if (next_ == done_.size()) return;
      i = next_++;
    }
    writer_.CopyRows(i);
    {
      MutexLock lock(&mu_);
      done_[i] = true;
    }
    cv_.NotifyAll();
  }
}

namespace {

// The first i in [0, n) with !pred(i), for a pred that holds on a prefix.
template <typename Pred>
size_t PartitionPoint(size_t n, Pred pred) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (pred(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace

void RowCopyPipeline::WaitReady(size_t offset, size_t size) {
  if (size == 0) return;
  // The row copies overlapping [offset, offset + size) are [first, last):
  // their ranges ascend and do not overlap.
  const size_t n = writer_.n_row_copies();
  const size_t first = PartitionPoint(n, [&](size_t i) { return writer_.RowBytes(i).second <= offset; });
  const size_t last = PartitionPoint(n, [&](size_t i) { return writer_.RowBytes(i).first < offset + size; });
  if (first >= last) return;  // header bytes only
  MutexLock lock(&mu_);
  cv_.Wait(&lock, [&] {
    mu_.AssertHeld();  // the predicate runs with the lock held
    return std::all_of(done_.begin() + first, done_.begin() + last, [](bool d) { return d; });
  });
}

void RowCopyPipeline::WaitFn(void* self, size_t offset, size_t size) {
  static_cast<RowCopyPipeline*>(self)->WaitReady(offset, size);
}

}  // namespace agentkv::engine
