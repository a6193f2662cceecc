#pragma once
// SchedulerOptions: the knobs of the Scheduler (sched/scheduler.h), set once
// at construction (cli/ fills them from flags and AGENTKV_* variables).
// Plain data; each field says its default and what it trades.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "api/backend.h"
#include "remote/remote_tier.h"

namespace agentkv::sched {

struct SchedulerOptions {
  std::string model_id;             // name clients send as "model"
  int prefill_chunk = 512;          // max prefill tokens per iteration
  size_t max_queue = 64;            // waiting requests beyond this -> 429
  int64_t queue_timeout_ms = 120000;  // a request waiting longer -> error
  int default_max_tokens = 256;     // when the request sets none
  double diverge_ratio = 0.5;
  // The remote tier below the disk (docs/remote.md); not owned, must outlive
  // the scheduler; null: none. Used only with a store.
  RemoteTier* remote = nullptr;
  // Agents' last prompts kept for incremental tokenization (PromptTokenCache).
  size_t prompt_token_cache_bytes = size_t{64} << 20;
  // The agent table (texts, tokens and spans of every agent known here, plus
  // the implicit-lookup index): above this many bytes, the least recently used
  // agents whose cache lives only on disk (not in a slot, the RAM pool or an
  // unsaved turn) are dropped from it; their next turn reads them back from
  // their manifest. Agents in a slot or in RAM are never dropped, so the table
  // may exceed this by their metadata (bounded by the slots and --cache-ram).
  size_t agent_table_bytes = size_t{256} << 20;
  // Requests that set no reasoning_format get this one (--reasoning-format).
  api::ReasoningFormat reasoning_format = api::ReasoningFormat::kAuto;
  // Jinja chat template used instead of the model's (--chat-template-file);
  // empty: the model's. Check it with engine::ChatFormat::CheckTemplate.
  std::string chat_template;
  // A disk read of an agent lands its blocks' rows in llama.cpp's state
  // layout while it reads (sched/read_landing.h), at the cost of a second
  // slot-sized state buffer (page-locked on a GPU: e.g. 1.2 GB for an
  // 8B-shape slot of 32K tokens). Unset: on when the context's staging
  // buffer is page-locked (a model on a GPU), where the restore's host-side
  // copy is what the inference thread would otherwise add after the read.
  std::optional<bool> read_landing;
  // When the landing's memory is reserved (engine::StagingBuffer::When):
  // while the scheduler is made (kNow), on a thread of its own, the caller
  // calling WaitReadLandingReserved before it serves (kBeside), or in the
  // background, reads meanwhile taking the unlanded route (kBackground).
  engine::StagingBuffer::When read_landing_reserve = engine::StagingBuffer::When::kNow;
  // Start() faults in one slot's worth of block tensors (the sizes of
  // engine::BlockTensorSizes at slot_ctx positions) on the read threads, held
  // in the store's read reserve (util/warm_memory.h, AgentStore::read_reserve)
  // and refilled by freed read blocks and when the server is idle (RefillReadReserveWhenIdle): a
  // disk read's tensors then do not fault page by page inside the read. Costs that memory while idle (8B shape: 302 MB at an 8K slot,
  // 1.2 GB at 32K) and the start-up time to fault it in. Unset: on.
  std::optional<bool> read_reserve;
  // A returning agent's restore and first decode run while its blocks are
  // still being read (sched/scheduler_pipelined.cc): once its read is planned
  // (an agent the table knows) or its manifest is in (one it does not, e.g.
  // after a restart), the agent is admitted, its slot gets the landing's
  // cells, and the first decode copies each layer's rows in as they land
  // and computes it (sched/pipelined_restore.h); the turn uses the result only
  // if the read then verified every block, else it prefills cold. Only while
  // that agent is the only one running (others are never held up by its
  // read; a request that arrives meanwhile makes it yield and restore the
  // usual way). Turns the read landing on. Unset: on where the context
  // stages through pinned memory (a GPU), off on CPU, where the read is not
  // the restore's bottleneck (bench/HISTORY.md, stops 14 and 15).
  std::optional<bool> pipelined_restore;
};

}  // namespace agentkv::sched
