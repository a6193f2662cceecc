#include "sched/read_landing.h"

#include <algorithm>

#include "util/log.h"

namespace agentkv::sched {

ReadLanding::ReadLanding(const engine::KvLayout& layout, uint32_t n_stream, uint64_t capacity, bool pinned)
    : buffer_(std::make_shared<Buffer>(layout, n_stream, pinned)) {
  std::span<uint8_t> buf = buffer_->staging.Get(capacity);
  // Fault the pages in now (page-locked memory already is), not in a read.
  if (!buffer_->staging.pinned()) std::fill(buf.begin(), buf.end(), uint8_t{0});
  buffer_->capacity = capacity;
}

std::shared_ptr<ReadLanding::Ticket> ReadLanding::Reserve() {
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
}

void ReadLanding::Ticket::OnBlockRead(uint32_t index, const KvBlock& block) {
  if (!writer_ || index >= ids_.size() || block.index != index) return;
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
  return state_;
}

}  // namespace agentkv::sched
