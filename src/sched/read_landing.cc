#include "sched/read_landing.h"

#include <algorithm>

#include "util/log.h"

namespace agentkv::sched {

ReadLanding::ReadLanding(const engine::KvLayout& layout, uint32_t n_stream, uint64_t capacity, bool pinned,
                         engine::StagingBuffer::When when)
    : buffer_(std::make_shared<Buffer>(layout, n_stream, pinned)) {
  buffer_->capacity = capacity;
  buffer_->staging.Reserve(capacity, when, "read landing", "landing-reserve");
}

void ReadLanding::WaitReserved() const { buffer_->staging.WaitReserved(); }
uint64_t ReadLanding::page_locked_bytes() const { return buffer_->staging.page_locked_bytes(); }
uint64_t ReadLanding::heap_bytes() const { return buffer_->staging.heap_bytes(); }

std::shared_ptr<ReadLanding::Ticket> ReadLanding::Reserve() {
  // Still being reserved in the background: this read takes the unlanded route.
  if (!buffer_->staging.reserved()) return nullptr;
  if (current_.lock() != nullptr) return nullptr;  // a read (or its unadmitted result) holds it
  auto ticket = std::make_shared<Ticket>(buffer_);
  current_ = ticket;
  return ticket;
}

void ReadLanding::Ticket::OnPlan(uint32_t first, std::span<const BlockRef> blocks) {
  if (first != 0 || blocks.empty()) return;
  uint64_t n_tokens = 0;
  for (const BlockRef& b : blocks) n_tokens += b.n_tokens;
  if (n_tokens == 0 || n_tokens > UINT32_MAX) return;
  const engine::KvLayout& layout = buffer_->layout;
  const uint64_t bytes = engine::MaxStateBytes(layout.slot, static_cast<uint32_t>(n_tokens), buffer_->n_stream);
  if (bytes > buffer_->capacity) return;
  std::span<uint8_t> state = buffer_->staging.Get(bytes);  // within capacity: no allocation
  auto writer = engine::BlocksStateWriter::StartWithoutBlocks(layout, static_cast<uint32_t>(n_tokens),
                                                             buffer_->n_stream, state);
  if (!writer.ok()) return;  // e.g. a sliding-window section: restored from the blocks
  writer_.emplace(std::move(writer).value());
  state_ = state;
  n_tokens_ = static_cast<uint32_t>(n_tokens);
  for (const BlockRef& b : blocks) ids_.push_back(b.id);
  landed_ = std::make_unique<std::atomic<bool>[]>(blocks.size());
  if (on_progress_ == nullptr) return;
  // Streaming: each row copy takes one tensor of every block.
  const size_t n_copies = writer_->n_row_copies();
  for (size_t i = 0; i < n_copies; ++i) copy_of_tensor_.emplace_back(writer_->RowTensorName(i), i);
  std::sort(copy_of_tensor_.begin(), copy_of_tensor_.end());
  blocks_left_ = std::make_unique<std::atomic<uint32_t>[]>(n_copies);
  for (size_t i = 0; i < n_copies; ++i) blocks_left_[i].store(static_cast<uint32_t>(blocks.size()));
  block_bytes_ = std::make_unique<BlockBytes[]>(blocks.size());
  planned_.store(true, std::memory_order_release);
  on_progress_();
}

void ReadLanding::Ticket::OnDataRead(uint32_t index, const BlockFileLayout& layout, uint64_t begin, uint64_t end) {
  if (!Streams() || index >= ids_.size() || layout.decoded.block.index != index) return;
  const std::vector<KvTensor>& tensors = layout.decoded.block.tensors;
  BlockBytes& bytes = block_bytes_[index];
  std::vector<size_t> complete;  // tensors whose last bytes this range brought
  {
    MutexLock lock(&bytes.mu);
    if (bytes.left.empty()) {
      for (size_t k : layout.file_order) bytes.left.push_back(tensors[k].data.size());
    }
    uint64_t at = 0;
    for (size_t j = 0; j < layout.file_order.size() && at < end; ++j) {
      const uint64_t size = tensors[layout.file_order[j]].data.size();
      const uint64_t lo = std::max(begin, at), hi = std::min(end, at + size);
      if (lo < hi && bytes.left[j] >= hi - lo) {
        bytes.left[j] -= hi - lo;
        if (bytes.left[j] == 0) complete.push_back(layout.file_order[j]);
      }
      at += size;
    }
  }
  ReaderMutexLock copying(&copy_mu_);
  if (stopped_) return;  // abandoned: the state is no longer this read's to write
  for (size_t k : complete) {
    const KvTensor& t = tensors[k];
    auto it = std::lower_bound(copy_of_tensor_.begin(), copy_of_tensor_.end(), std::make_pair(t.name, size_t{0}));
    if (it == copy_of_tensor_.end() || it->first != t.name) continue;  // rows the state does not take
    if (Status st = writer_->CopyBlockTensor(it->second, layout.decoded.block, t); !st.ok()) {
      AKV_LOG_DEBUG("read landing: block %u tensor %s not landed: %s", index, t.name.c_str(), st.ToString().c_str());
      continue;  // its row copy never lands: the state is not used
    }
    if (blocks_left_[it->second].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      {
        MutexLock lock(&mu_);
        ++copies_landed_;
      }
      cv_.NotifyAll();
    }
  }
}

void ReadLanding::Ticket::OnRecord(const AgentRecord& record) {
  if (on_progress_ == nullptr) return;
  {
    MutexLock lock(&mu_);
    record_ = std::make_shared<const AgentRecord>(record);
  }
  on_progress_();
}

std::shared_ptr<const AgentRecord> ReadLanding::Ticket::EarlyRecord() const {
  MutexLock lock(&mu_);
  return record_;
}

bool ReadLanding::Ticket::Landed(size_t offset, size_t size) const {
  if (!Planned() || !Streams()) return false;  // (Planned first: it publishes the writer)
  if (size == 0) return true;
  const engine::BlocksStateWriter& w = *writer_;
  for (size_t i = w.FirstRowCopyEndingAfter(offset); i < w.n_row_copies() && w.RowBytes(i).first < offset + size;
       ++i) {
    if (blocks_left_[i].load(std::memory_order_acquire) != 0) return false;
  }
  return true;
}

bool ReadLanding::Ticket::Final() const {
  MutexLock lock(&mu_);
  return abandoned_;
}

bool ReadLanding::Ticket::WaitLanded(size_t offset, size_t size, std::chrono::microseconds timeout) const {
  if (Landed(offset, size)) return true;
  MutexLock lock(&mu_);
  cv_.WaitFor(&lock, timeout, [&] {
    mu_.AssertHeld();  // the predicate runs with the lock held
    return abandoned_ || Landed(offset, size);
  });
  return Landed(offset, size);
}

void ReadLanding::Ticket::Abandon() {
  {
    WriterMutexLock copies(&copy_mu_);  // waits for the copies in progress
    stopped_ = true;
  }
  {
    MutexLock lock(&mu_);
    abandoned_ = true;
  }
  cv_.NotifyAll();
}

void ReadLanding::Ticket::OnBlockRead(uint32_t index, const KvBlock& block) {
  if (!writer_ || index >= ids_.size() || block.index != index) return;
  if (Streams()) {  // its tensors landed as they came in (OnDataRead)
    landed_[index].store(true, std::memory_order_release);
    return;
  }
  ReaderMutexLock copying(&copy_mu_);
  if (stopped_) return;
  if (Status st = writer_->CopyBlock(block); !st.ok()) {
    AKV_LOG_DEBUG("read landing: block %u not landed: %s", index, st.ToString().c_str());
    return;
  }
  landed_[index].store(true, std::memory_order_release);
}

std::span<const uint8_t> ReadLanding::Ticket::StateFor(const std::vector<PoolBlock>& blocks) const {
  if (!writer_ || blocks.size() != ids_.size()) return {};
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].id != ids_[i] || !landed_[i].load(std::memory_order_acquire)) return {};
  }
  if (Streams()) {  // and every row copy got every block's tensor
    MutexLock lock(&mu_);
    if (copies_landed_ != writer_->n_row_copies()) return {};
  }
  return state_;
}

}  // namespace agentkv::sched
