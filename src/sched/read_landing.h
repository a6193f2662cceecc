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
// Streaming (Ticket::Stream, before the read starts): the read hands out its
// chunks by offset (AgentStore's LoadObserver::Streams), and every block
// tensor is copied into the state as soon as its bytes are in, before its
// file's checksum is checked; a row copy of the state (one layer's K or V
// rows for every position) has landed once every block's tensor for it has.
// Landed/WaitLanded let a layer-by-layer import follow the read
// (engine/layer_gated_import.h):
// the scheduler may then restore an agent while it is still being read, and
// uses the result only if the load then verified every planned block
// (StateFor). OnRecord hands the manifest over as soon as it is read.
//
// Threads: Reserve and Ticket::StateFor on the inference thread; a Ticket's
// LoadObserver calls on the read threads (AgentStore::LoadBlocks). A
// ticket's bytes are read by StateFor only after the load returned, which
// the scheduler hands over under its mutex; streaming, by the inference
// thread once Landed said they have landed (no copy touches them again).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/layer_gated_import.h"
#include "engine/seq_state.h"
#include "engine/staging_buffer.h"
#include "kv/block_pool.h"
#include "store/agent_store.h"
#include "util/mutex.h"

namespace agentkv::sched {

class ReadLanding {
 public:
  // A landing for states of up to `capacity` bytes (one slot's:
  // engine::MaxStateBytes), allocated now (page-locked memory takes ~0.3 ms
  // per MB to allocate: never inside a request), or, `when` kBeside or
  // kBackground, on a thread of its own: until it is ready every read takes
  // the unlanded route. `layout` (slots, blocks) must outlive the landing and
  // its tickets; n_stream as the context's.
  ReadLanding(const engine::KvLayout& layout, uint32_t n_stream, uint64_t capacity, bool pinned,
              engine::StagingBuffer::When when = engine::StagingBuffer::When::kNow);
  // Returns once the memory is reserved (at once if it was reserved in the
  // constructor). Any thread.
  void WaitReserved() const;
  // The landing's memory now, page-locked and heap (engine::StagingBuffer::
  // page_locked_bytes, heap_bytes). Never waits; any thread.
  uint64_t page_locked_bytes() const;
  uint64_t heap_bytes() const;

  class Ticket;
  // The landing for the next read, or null while another ticket lives or
  // the memory is still being reserved. Never waits.
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

class ReadLanding::Ticket : public LoadObserver, public engine::RowSource {
 public:
  explicit Ticket(std::shared_ptr<Buffer> buffer) : buffer_(std::move(buffer)) {}

  // LoadObserver (read threads). A plan from a block other than 0, or one
  // whose state exceeds the capacity or cannot be written without its blocks,
  // lands nothing.
  void OnPlan(uint32_t first, std::span<const BlockRef> blocks) override;
  void OnBlockRead(uint32_t index, const KvBlock& block) override;
  bool Streams() const override { return on_progress_ != nullptr && writer_.has_value(); }
  void OnDataRead(uint32_t index, const BlockFileLayout& layout, uint64_t begin, uint64_t end) override;
  void OnRecord(const AgentRecord& record) override;

  // Before the read starts: stream it; `on_progress` is called (on the read
  // thread) once the plan is set (Planned()) and once the manifest is read
  // (EarlyRecord()).
  void Stream(std::function<void()> on_progress) { on_progress_ = std::move(on_progress); }
  // Streaming: whether the plan lands (then state(), writer(), n_tokens()
  // and planned_ids() hold it), and the agent's record once read (else null).
  bool Planned() const { return planned_.load(std::memory_order_acquire); }
  std::shared_ptr<const AgentRecord> EarlyRecord() const;
  std::span<const uint8_t> state() const { return state_; }
  const engine::BlocksStateWriter* writer() const { return writer_ ? &*writer_ : nullptr; }
  const std::vector<std::string>& planned_ids() const { return ids_; }
  // engine::RowSource (streaming; any thread): whether state bytes
  // [offset, offset + size) have landed (headers: at once; every row copy
  // they overlap: once every block's tensor for it was copied in). Landed
  // never blocks; WaitLanded waits at most `timeout`, less once the ticket
  // is abandoned (rows that had not landed then never will). False for a
  // ticket that does not stream.
  bool Landed(size_t offset, size_t size) const override;
  bool WaitLanded(size_t offset, size_t size, std::chrono::microseconds timeout) const override;
  bool Final() const override;  // abandoned (by the read once the load returned, or the scheduler)
  // Ends every WaitLanded, now and later, and stops the read's copies into
  // the state: once it returns, no copy is in progress or starts, so what
  // Landed says stays true. Waits only for the copies in progress (memory
  // copies of one block tensor each, never the disk). Any thread, any time:
  // the read calls it once the load returned; the scheduler to give up a
  // restore that follows a read still running (a cancelled turn). The
  // ticket (and its state buffer) lives on while the read holds it.
  // Idempotent. StateFor is then empty unless every planned block had
  // landed before.
  void Abandon();

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
  std::unique_ptr<std::atomic<bool>[]> landed_;  // per planned block: verified and copied

  // Streaming. Set before the read starts:
  std::function<void()> on_progress_;
  std::atomic<bool> planned_{false};  // set last by OnPlan: what it wrote is published
  // Set by OnPlan: per block tensor name, its row copy; per row copy, the
  // blocks still to land in it.
  std::vector<std::pair<std::string, size_t>> copy_of_tensor_;  // sorted by name
  std::unique_ptr<std::atomic<uint32_t>[]> blocks_left_;
  // Per block: its tensors' bytes still to come, in file order (sized by
  // the block's first OnDataRead), under that block's mutex.
  struct BlockBytes {
    Mutex mu;
    std::vector<uint64_t> left GUARDED_BY(mu);
  };
  std::unique_ptr<BlockBytes[]> block_bytes_;
  // Held shared by each copy into the state (read threads), exclusively by
  // Abandon: after it, stopped_ keeps every copy out.
  SharedMutex copy_mu_;
  bool stopped_ GUARDED_BY(copy_mu_) = false;
  mutable Mutex mu_;
  mutable CondVar cv_;  // a row copy landed, or abandoned
  size_t copies_landed_ GUARDED_BY(mu_) = 0;  // (count; which: blocks_left_)
  bool abandoned_ GUARDED_BY(mu_) = false;
  std::shared_ptr<const AgentRecord> record_ GUARDED_BY(mu_);
};

}  // namespace agentkv::sched
