#pragma once
// ReadLanding: where a disk read of an agent lands its KV in llama.cpp's
// state layout while the read is still going, so that the restore at
// admission is one import of bytes already in place.
//
// Without it a warm restore starts after the whole read: the inference
// thread copies every block's rows into the staging buffer (the state is
// layer-major and block files are block-major, so layer 0 needs every file),
// then llama.cpp copies them to the device. With it, the read thread that
// verified a block copies that block's rows into a second staging-sized
// buffer (page-locked on a GPU) while other files are still being read; the
// inference thread is left with importing a finished state.
//
// One read at a time holds the landing (a Ticket); other reads restore as
// before, and so do reads whose blocks do not all land (a bad block, a
// manifest that names other blocks, an agent longer than a slot, a shape
// with a sliding-window section).
//
// Threads: Reserve and Ticket::StateFor on the inference thread; a Ticket's
// LoadObserver calls on the read threads (AgentStore::LoadBlocks). A
// ticket's bytes are read by StateFor only after the load returned, which
// the scheduler hands over under its mutex.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/seq_state.h"
#include "engine/staging_buffer.h"
#include "kv/block_pool.h"
#include "store/agent_store.h"

namespace agentkv::sched {

class ReadLanding {
 public:
  // A landing for states of up to `capacity` bytes (one slot's:
  // engine::MaxStateBytes), allocated now (page-locked memory takes ~0.3 ms
  // per MB to allocate: never inside a request). `layout` (slots, blocks)
  // must outlive the landing and its tickets; n_stream as the context's.
  ReadLanding(const engine::KvLayout& layout, uint32_t n_stream, uint64_t capacity, bool pinned);

  class Ticket;
  // The landing for the next read, or null while another ticket lives.
  std::shared_ptr<Ticket> Reserve();

 private:
  struct Buffer {
    Buffer(const engine::KvLayout& l, uint32_t s, bool pinned) : layout(l), n_stream(s), staging(pinned) {}
    engine::KvLayout layout;
    uint32_t n_stream;
    uint64_t capacity = 0;
    engine::StagingBuffer staging;  // used by one ticket at a time
  };
  std::shared_ptr<Buffer> buffer_;  // shared with the tickets: outlives the last one
  std::weak_ptr<Ticket> current_;
};

class ReadLanding::Ticket : public LoadObserver {
 public:
  explicit Ticket(std::shared_ptr<Buffer> buffer) : buffer_(std::move(buffer)) {}

  // LoadObserver (read threads). A plan from a block other than 0, or one
  // whose state exceeds the capacity or cannot be written without its blocks,
  // lands nothing.
  void OnPlan(uint32_t first, std::span<const BlockRef> blocks) override;
  void OnBlockRead(uint32_t index, const KvBlock& block) override;

  // After the load returned: the state of positions [0, n_tokens()) when
  // `blocks` (what the turn restores from: the load's result, cut to the
  // agent's tokens) are exactly the planned blocks, by id and in order, and
  // every one of them landed; else empty (restore from the blocks).
  std::span<const uint8_t> StateFor(const std::vector<PoolBlock>& blocks) const;
  uint32_t n_tokens() const { return n_tokens_; }

 private:
  std::shared_ptr<Buffer> buffer_;
  // Written by OnPlan, before any OnBlockRead (LoadBlocks' order).
  std::optional<engine::BlocksStateWriter> writer_;
  std::span<uint8_t> state_;
  std::vector<std::string> ids_;
  uint32_t n_tokens_ = 0;
  std::unique_ptr<std::atomic<bool>[]> landed_;  // per planned block
};

}  // namespace agentkv::sched
