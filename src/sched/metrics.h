#pragma once
// SchedulerMetrics: counters and histograms of the inference loop, rendered
// in Prometheus text format. Thread safety: internally synchronized.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/mutex.h"

namespace agentkv::sched {

class Histogram {
 public:
  explicit Histogram(std::initializer_list<double> bounds);
  void Observe(double v);
  // Appends "<name>_bucket{<labels>le=...}" lines, _sum and _count.
  void Render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bound, plus +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class SchedulerMetrics {
 public:
  SchedulerMetrics();
  void CountRequest(const std::string& outcome);                 // ok | error | cancelled
  void ObserveTtft(const std::string& cache_state, double ms);   // resident|hot|warm|cold
  void CountMatch(const std::string& match);
  void AddTokens(uint64_t prefilled, uint64_t reused, uint64_t generated);
  void ObserveBatch(uint32_t decode_tokens, uint32_t prefill_tokens);
  // One loop iteration that ran a forward pass: `decode_ms` in llama_decode,
  // `iteration_ms` the whole iteration (admission, sampling, streaming and
  // commits included), so their difference is the loop's own cost.
  void ObserveStep(double decode_ms, double iteration_ms);
  // A forward pass that fed no prompt tokens (every row a decoding agent's
  // next token): its time in llama_decode and `context_tokens`, the cells its
  // rows attend to (the sum of their agents' positions). The step time of a
  // decode at a given load, apart from passes that also prefill.
  void ObserveDecodeOnlyPass(double decode_ms, uint64_t context_tokens);
  void ObserveDiskWait(double ms);
  void ObserveRemoteFetch(double ms);   // an agent fetched from the remote tier
  void ObserveRemotePush(double ms);    // a turn published to the remote tier
  void CountEviction(const std::string& what, uint64_t n = 1);   // slot | pool | table
  void CountCorruption(uint64_t n);
  void CountSaveFailure();
  // A prompt tokenized: `reused` of its `tokens` came from the agent's previous prompt.
  void AddTokenized(uint64_t tokens, uint64_t reused);
  void CountReadFailure();  // a disk read refused by the OS (EIO), not corruption
  // A turn started from another agent's cache (sched/prefix_donor.h, forks):
  // `source` is where it came from (slot | hot | warm | remote), `tokens` reused.
  void AddSharedPrefix(const std::string& source, uint64_t tokens);
  void CountLandedRestore();  // a warm restore imported from the read landing (sched/read_landing.h)
  // A warm restore imported, and its first chunk decoded, while the read ran (sched/scheduler_pipelined.cc);
  // `fell_back`: the read then did not verify what was imported, and the turn started over cold.
  void CountPipelinedRestore(bool fell_back);
  // A pipelined restore given up (its turn cancelled, failed or shut down)
  // without waiting for its read.
  void CountPipelinedAbandoned();
  // Gauges supplied at render time.
  struct Gauges {
    uint64_t queue_length = 0;
    uint64_t active_requests = 0;
    uint64_t resident_agents = 0, resident_bytes = 0;
    uint64_t hot_agents = 0, hot_bytes = 0, hot_budget_bytes = 0;
    uint64_t warm_agents = 0, warm_bytes = 0;
    uint64_t io_pending = 0;
    uint64_t unsaved_agents = 0;  // committed turns whose save has not landed (or failed)
    uint64_t disk_out_of_space = 0;        // the store's counters (StoreStats)
    uint64_t disk_evictions_budget = 0, disk_evictions_no_space = 0;
    uint64_t agent_table_agents = 0, agent_table_bytes = 0, agent_table_budget_bytes = 0;
    uint64_t read_reserve_bytes = 0, read_reserve_target_bytes = 0;  // util/warm_memory.h (--read-reserve)
    // The one-slot state buffers' host memory (engine/staging_buffer.h): the
    // context's staging buffer and the read landing (sched/read_landing.h).
    uint64_t staging_page_locked_bytes = 0, staging_heap_bytes = 0;
    uint64_t landing_page_locked_bytes = 0, landing_heap_bytes = 0;
  };
  std::string Render(const Gauges& g) const;

 private:
  mutable Mutex mu_;
  std::map<std::string, uint64_t> requests_ GUARDED_BY(mu_);
  std::map<std::string, uint64_t> matches_ GUARDED_BY(mu_);
  std::map<std::string, uint64_t> evictions_ GUARDED_BY(mu_);
  std::map<std::string, uint64_t> shared_hits_ GUARDED_BY(mu_);
  std::map<std::string, uint64_t> shared_tokens_ GUARDED_BY(mu_);
  std::map<std::string, Histogram> ttft_ GUARDED_BY(mu_);
  uint64_t prefilled_ GUARDED_BY(mu_) = 0;
  uint64_t reused_ GUARDED_BY(mu_) = 0;
  uint64_t generated_ GUARDED_BY(mu_) = 0;
  uint64_t corruption_ GUARDED_BY(mu_) = 0;
  uint64_t save_failures_ GUARDED_BY(mu_) = 0;
  uint64_t read_failures_ GUARDED_BY(mu_) = 0;
  uint64_t landed_restores_ GUARDED_BY(mu_) = 0;
  uint64_t pipelined_restores_ GUARDED_BY(mu_) = 0;
  uint64_t pipelined_fallbacks_ GUARDED_BY(mu_) = 0;
  uint64_t pipelined_abandoned_ GUARDED_BY(mu_) = 0;
  uint64_t tokenized_ GUARDED_BY(mu_) = 0;
  uint64_t tokenized_reused_ GUARDED_BY(mu_) = 0;
  Histogram batch_tokens_ GUARDED_BY(mu_);
  Histogram prefill_tokens_ GUARDED_BY(mu_);
  Histogram disk_wait_ms_ GUARDED_BY(mu_);
  Histogram decode_ms_ GUARDED_BY(mu_);
  Histogram iteration_ms_ GUARDED_BY(mu_);
  Histogram decode_only_ms_ GUARDED_BY(mu_);
  Histogram decode_only_context_ GUARDED_BY(mu_);
  Histogram remote_fetch_ms_ GUARDED_BY(mu_);
  Histogram remote_push_ms_ GUARDED_BY(mu_);
};

}  // namespace agentkv::sched
