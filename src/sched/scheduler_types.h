#pragma once
// Internal types of the Scheduler (inference-thread state). Not part of the
// public interface; included by scheduler*.cc only.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/grammar.h"
#include "sched/reply_emitter.h"
#include "sched/scheduler.h"
#include "sched/waiting_queue.h"
#include "sched/turn_restore.h"
#include "store/agent_record.h"

namespace agentkv::sched {

using Clock = std::chrono::steady_clock;

struct Scheduler::Active {
  std::unique_ptr<Waiting> w;
  Agent* agent = nullptr;
  CachedSequence committed_seq;              // the agent's sequence before this turn (restored on failure)
  std::vector<PoolBlock> restored_blocks;    // hot/warm: the blocks the slot was restored from
  std::optional<AgentKey> shared_from;       // another agent whose cache the slot started from
  int slot = -1;
  std::vector<int32_t> pending;              // prompt tokens to prefill
  std::vector<engine::TokenSpan> pending_spans;
  size_t n_fed = 0;                          // pending tokens already in the slot
  bool decoding = false;                     // prompt done; next_token to feed
  int32_t next_token = -1;
  std::unique_ptr<engine::Sampler> sampler;
  std::unique_ptr<ReplyEmitter> reply;       // the reply's text to the sink (stop strings, reply parser)
  int64_t n_generated = 0;
  int64_t max_tokens = 0;
  api::Usage usage;
  bool done = false;
  int batch_row = -1;                        // this iteration: item index with logits
  size_t batch_fed = 0;                      // this iteration: prefill tokens in the batch
  // Its pipelined restore while it runs (sched/pipelined_restore.h): the
  // slot is not fed by Step until it is resolved or given up.
  std::unique_ptr<PipelinedRestore> restore;
};

}  // namespace agentkv::sched
