#pragma once
// Internal types of the Scheduler (inference-thread state). Not part of the
// public interface; included by scheduler*.cc only.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace agentkv::sched {

using Clock = std::chrono::steady_clock;

// One agent known to this process. `seq` is the agent's cached sequence:
// while idle, exactly what its newest cache (slot, pool or disk) holds; during
// a turn, the tokens in its slot (text may run ahead by the unprocessed prompt).
struct Scheduler::Agent {
  AgentKey key;
  CachedSequence seq;
  int slot = -1;               // resident slot, -1 if none
  bool busy = false;           // a request is active for it
  bool on_disk = false;        // the store holds a manifest for it
  std::optional<AgentKey> fork_source;  // implicit fork: restore from this agent's blocks
  int64_t last_use_ms = 0;
};

struct Scheduler::Waiting {
  api::GenerationRequest req;
  std::shared_ptr<api::GenerationSink> sink;
  Clock::time_point received;
  std::string prompt;  // rendered (chat template applied)
  engine::TokenizedText fresh;  // prompt tokenized with BOS (on the submitting thread)
};

struct Scheduler::Active {
  std::unique_ptr<Waiting> w;
  Agent* agent = nullptr;
  int slot = -1;
  std::vector<int32_t> pending;              // prompt tokens to prefill
  std::vector<engine::TokenSpan> pending_spans;
  size_t n_fed = 0;                          // pending tokens already in the slot
  bool decoding = false;                     // prompt done; next_token to feed
  int32_t next_token = -1;
  std::unique_ptr<engine::Sampler> sampler;
  std::string out;                           // generated text (EOG excluded)
  size_t emitted = 0;                        // bytes of `out` sent
  int64_t n_generated = 0;
  int64_t max_tokens = 0;
  size_t max_stop_len = 0;
  api::Usage usage;
  bool done = false;
  int batch_row = -1;                        // this iteration: item index with logits
  size_t batch_fed = 0;                      // this iteration: prefill tokens in the batch
};

}  // namespace agentkv::sched
