#include "sched/metrics.h"

#include <cmath>
#include <cstdio>
#include <tuple>

namespace agentkv::sched {
namespace {

// Integers (counters, byte gauges) exactly; fractions with 6 significant digits.
std::string Num(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 9e15) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", v);
  }
  return buf;
}

const std::initializer_list<double> kTtftBoundsMs = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000};

}  // namespace

Histogram::Histogram(std::initializer_list<double> bounds) : bounds_(bounds), counts_(bounds.size() + 1, 0) {}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string* out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    const std::string le = i < bounds_.size() ? Num(bounds_[i]) : "+Inf";
    *out += name + "_bucket{" + labels + (labels.empty() ? "" : ",") + "le=\"" + le + "\"} " + std::to_string(cum) + "\n";
  }
  const std::string l = labels.empty() ? "" : "{" + labels + "}";
  *out += name + "_sum" + l + " " + Num(sum_) + "\n";
  *out += name + "_count" + l + " " + std::to_string(count_) + "\n";
}

SchedulerMetrics::SchedulerMetrics()
    : batch_tokens_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512}),
      prefill_tokens_({0, 16, 64, 128, 256, 512}),
      disk_wait_ms_({1, 5, 10, 50, 100, 500, 1000, 5000}),
      decode_ms_({1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}),
      iteration_ms_({1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}),
      decode_only_ms_({1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}),
      decode_only_context_({1024, 4096, 16384, 65536, 262144, 1048576}),
      remote_fetch_ms_({1, 5, 10, 50, 100, 500, 1000, 5000}),
      remote_push_ms_({1, 5, 10, 50, 100, 500, 1000, 5000}) {}

void SchedulerMetrics::CountRequest(const std::string& outcome) {
  MutexLock l(&mu_);
  ++requests_[outcome];
}
void SchedulerMetrics::ObserveTtft(const std::string& state, double ms) {
  MutexLock l(&mu_);
  ttft_.try_emplace(state, kTtftBoundsMs).first->second.Observe(ms);
}
void SchedulerMetrics::CountMatch(const std::string& match) {
  MutexLock l(&mu_);
  ++matches_[match];
}
void SchedulerMetrics::AddTokenized(uint64_t tokens, uint64_t reused) {
  MutexLock lock(&mu_);
  tokenized_ += tokens;
  tokenized_reused_ += reused;
}

void SchedulerMetrics::AddTokens(uint64_t prefilled, uint64_t reused, uint64_t generated) {
  MutexLock l(&mu_);
  prefilled_ += prefilled;
  reused_ += reused;
  generated_ += generated;
}
void SchedulerMetrics::ObserveBatch(uint32_t decode_tokens, uint32_t prefill_tokens) {
  MutexLock l(&mu_);
  batch_tokens_.Observe(decode_tokens + prefill_tokens);
  prefill_tokens_.Observe(prefill_tokens);
}
void SchedulerMetrics::ObserveStep(double decode_ms, double iteration_ms) {
  MutexLock l(&mu_);
  decode_ms_.Observe(decode_ms);
  iteration_ms_.Observe(iteration_ms);
}
void SchedulerMetrics::ObserveDecodeOnlyPass(double decode_ms, uint64_t context_tokens) {
  MutexLock l(&mu_);
  decode_only_ms_.Observe(decode_ms);
  decode_only_context_.Observe(static_cast<double>(context_tokens));
}
void SchedulerMetrics::ObserveDiskWait(double ms) {
  MutexLock l(&mu_);
  disk_wait_ms_.Observe(ms);
}
void SchedulerMetrics::ObserveRemoteFetch(double ms) {
  MutexLock l(&mu_);
  remote_fetch_ms_.Observe(ms);
}
void SchedulerMetrics::ObserveRemotePush(double ms) {
  MutexLock l(&mu_);
  remote_push_ms_.Observe(ms);
}
void SchedulerMetrics::CountEviction(const std::string& what, uint64_t n) {
  MutexLock l(&mu_);
  evictions_[what] += n;
}
void SchedulerMetrics::CountCorruption(uint64_t n) {
  MutexLock l(&mu_);
  corruption_ += n;
}

void SchedulerMetrics::CountSaveFailure() {
  MutexLock l(&mu_);
  ++save_failures_;
}

void SchedulerMetrics::CountReadFailure() {
  MutexLock l(&mu_);
  ++read_failures_;
}

void SchedulerMetrics::AddSharedPrefix(const std::string& source, uint64_t tokens) {
  MutexLock l(&mu_);
  ++shared_hits_[source];
  shared_tokens_[source] += tokens;
}

void SchedulerMetrics::CountLandedRestore() {
  MutexLock l(&mu_);
  ++landed_restores_;
}

void SchedulerMetrics::CountPipelinedRestore(bool fell_back) {
  MutexLock l(&mu_);
  ++(fell_back ? pipelined_fallbacks_ : pipelined_restores_);
}

void SchedulerMetrics::CountPipelinedAbandoned() {
  MutexLock l(&mu_);
  ++pipelined_abandoned_;
}

std::string SchedulerMetrics::Render(const Gauges& g) const {
  MutexLock l(&mu_);
  std::string out;
  auto counter_family = [&](const std::string& name, const std::string& help, const std::string& label,
                            const std::map<std::string, uint64_t>& m) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n";
    for (const auto& [k, v] : m) out += name + "{" + label + "=\"" + k + "\"} " + std::to_string(v) + "\n";
  };
  auto scalar = [&](const std::string& name, const std::string& type, const std::string& help, double v) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + Num(v) + "\n";
  };
  counter_family("agentkv_requests_total", "Generation requests by outcome.", "outcome", requests_);
  counter_family("agentkv_prefix_matches_total", "Prefix matches by type.", "match", matches_);
  counter_family("agentkv_evictions_total", "Agents evicted, by what they were evicted from.", "from", evictions_);
  counter_family("agentkv_shared_prefix_hits_total",
                 "Turns started from another agent's cache (prefix donors, forks), by where it was.", "source",
                 shared_hits_);
  counter_family("agentkv_shared_prefix_tokens_total", "Prompt tokens reused from another agent's cache, by where.",
                 "source", shared_tokens_);
  out += "# HELP agentkv_ttft_ms Time to first token by cache state.\n# TYPE agentkv_ttft_ms histogram\n";
  for (const auto& [state, h] : ttft_) h.Render("agentkv_ttft_ms", "cache_state=\"" + state + "\"", &out);
  scalar("agentkv_tokens_prefilled_total", "counter", "Prompt tokens computed.", double(prefilled_));
  scalar("agentkv_tokens_reused_total", "counter", "Prompt tokens reused from a cache.", double(reused_));
  scalar("agentkv_prompt_tokens_tokenized_total", "counter", "Prompt tokens produced by the tokenizer.",
         double(tokenized_));
  scalar("agentkv_prompt_tokens_tokenization_reused_total", "counter",
         "Of those, tokens taken from the agent's previous prompt instead of tokenized again.",
         double(tokenized_reused_));
  scalar("agentkv_tokens_generated_total", "counter", "Tokens generated.", double(generated_));
  scalar("agentkv_corruption_events_total", "counter", "Cache blocks or manifests that failed verification.",
         double(corruption_));
  scalar("agentkv_read_failures_total", "counter",
         "Reads of an agent from disk that the OS refused (EIO): served from what was read, the files kept.",
         double(read_failures_));
  scalar("agentkv_restores_landed_total", "counter",
         "Warm restores whose state was written while the disk read ran (the read landing), not after it.",
         double(landed_restores_));
  scalar("agentkv_restores_pipelined_total", "counter",
         "Warm restores imported, and their first chunk decoded, while the disk read ran (--pipelined-restore).",
         double(pipelined_restores_));
  scalar("agentkv_restores_pipelined_fallbacks_total", "counter",
         "Pipelined restores whose read then failed its checks: the turn started over cold.",
         double(pipelined_fallbacks_));
  scalar("agentkv_restores_pipelined_abandoned_total", "counter",
         "Pipelined restores given up (the turn cancelled, failed or shut down) without waiting for their read.",
         double(pipelined_abandoned_));
  scalar("agentkv_save_failures_total", "counter", "Saves of a turn to disk that failed (the turn stays in RAM).",
         double(save_failures_));
  out += "# HELP agentkv_batch_tokens Tokens per forward pass.\n# TYPE agentkv_batch_tokens histogram\n";
  batch_tokens_.Render("agentkv_batch_tokens", "", &out);
  out += "# HELP agentkv_batch_prefill_tokens Prefill tokens per forward pass.\n# TYPE agentkv_batch_prefill_tokens histogram\n";
  prefill_tokens_.Render("agentkv_batch_prefill_tokens", "", &out);
  out += "# HELP agentkv_decode_ms Time in llama_decode per forward pass.\n# TYPE agentkv_decode_ms histogram\n";
  decode_ms_.Render("agentkv_decode_ms", "", &out);
  out += "# HELP agentkv_loop_iteration_ms An inference-loop iteration that ran a forward pass, all of it "
         "(admission, the pass, sampling, streaming, commits).\n# TYPE agentkv_loop_iteration_ms histogram\n";
  iteration_ms_.Render("agentkv_loop_iteration_ms", "", &out);
  out += "# HELP agentkv_decode_only_ms Time in llama_decode per forward pass that fed no prompt tokens (decoding "
         "agents only).\n# TYPE agentkv_decode_only_ms histogram\n";
  decode_only_ms_.Render("agentkv_decode_only_ms", "", &out);
  out += "# HELP agentkv_decode_only_context_tokens Cells the rows of such a pass attend to (the sum of their "
         "agents' positions).\n# TYPE agentkv_decode_only_context_tokens histogram\n";
  decode_only_context_.Render("agentkv_decode_only_context_tokens", "", &out);
  out += "# HELP agentkv_disk_wait_ms Time a request waited for its cache to come from disk.\n# TYPE agentkv_disk_wait_ms histogram\n";
  disk_wait_ms_.Render("agentkv_disk_wait_ms", "", &out);
  out += "# HELP agentkv_remote_fetch_ms Time to fetch and verify an agent from the remote tier (the local read that found it missing or older included).\n# TYPE agentkv_remote_fetch_ms histogram\n";
  remote_fetch_ms_.Render("agentkv_remote_fetch_ms", "", &out);
  out += "# HELP agentkv_remote_push_ms Time to publish a saved turn to the remote tier.\n# TYPE agentkv_remote_push_ms histogram\n";
  remote_push_ms_.Render("agentkv_remote_push_ms", "", &out);
  scalar("agentkv_queue_length", "gauge", "Requests waiting for a slot.", double(g.queue_length));
  scalar("agentkv_active_requests", "gauge", "Requests in prefill or decode.", double(g.active_requests));
  scalar("agentkv_io_pending", "gauge", "Disk jobs queued or running.", double(g.io_pending));
  scalar("agentkv_unsaved_agents", "gauge", "Agents whose newest turn is only in RAM (save queued or failed).",
         double(g.unsaved_agents));
  out += "# HELP agentkv_tier_agents Agents with a copy of their cache in each tier (an agent can be in several).\n# TYPE agentkv_tier_agents gauge\n";
  out += "agentkv_tier_agents{tier=\"resident\"} " + std::to_string(g.resident_agents) + "\n";
  out += "agentkv_tier_agents{tier=\"hot\"} " + std::to_string(g.hot_agents) + "\n";
  out += "agentkv_tier_agents{tier=\"warm\"} " + std::to_string(g.warm_agents) + "\n";
  out += "# HELP agentkv_tier_bytes KV bytes held by each tier (copies counted in every tier that holds them).\n# TYPE agentkv_tier_bytes gauge\n";
  out += "agentkv_tier_bytes{tier=\"resident\"} " + std::to_string(g.resident_bytes) + "\n";
  out += "agentkv_tier_bytes{tier=\"hot\"} " + std::to_string(g.hot_bytes) + "\n";
  out += "agentkv_tier_bytes{tier=\"warm\"} " + std::to_string(g.warm_bytes) + "\n";
  scalar("agentkv_agent_table_agents", "gauge",
         "Agents in the scheduler's table (metadata and text; those dropped past the bound live on disk only).",
         double(g.agent_table_agents));
  scalar("agentkv_agent_table_bytes", "gauge", "Approximate bytes of the agent table and implicit-lookup index.",
         double(g.agent_table_bytes));
  scalar("agentkv_agent_table_budget_bytes", "gauge", "Bound of the agent table (--agent-table-ram).",
         double(g.agent_table_budget_bytes));
  scalar("agentkv_hot_budget_bytes", "gauge", "RAM block pool budget.", double(g.hot_budget_bytes));
  scalar("agentkv_read_reserve_bytes", "gauge",
         "Block memory faulted in and held for disk reads, not counted in the tiers (--read-reserve).",
         double(g.read_reserve_bytes));
  scalar("agentkv_read_reserve_target_bytes", "gauge", "What the read reserve is refilled up to (one slot's blocks).",
         double(g.read_reserve_target_bytes));
  out += "# HELP agentkv_host_buffer_bytes Host memory of the one-slot state buffers (the staging buffer, the read "
         "landing), page-locked for the GPU or heap; not counted in the tiers.\n"
         "# TYPE agentkv_host_buffer_bytes gauge\n";
  for (const auto& [buffer, memory, bytes] : {std::tuple{"staging", "page_locked", g.staging_page_locked_bytes},
                                              std::tuple{"staging", "heap", g.staging_heap_bytes},
                                              std::tuple{"landing", "page_locked", g.landing_page_locked_bytes},
                                              std::tuple{"landing", "heap", g.landing_heap_bytes}}) {
    out += std::string("agentkv_host_buffer_bytes{buffer=\"") + buffer + "\",memory=\"" + memory + "\"} " +
           std::to_string(bytes) + "\n";
  }
  scalar("agentkv_disk_out_of_space_total", "counter",
         "Save attempts the disk refused for lack of room (ENOSPC, EDQUOT); each is retried after an eviction.",
         double(g.disk_out_of_space));
  out += "# HELP agentkv_disk_evictions_total Agents deleted from disk, by why.\n"
         "# TYPE agentkv_disk_evictions_total counter\n";
  out += "agentkv_disk_evictions_total{reason=\"budget\"} " + std::to_string(g.disk_evictions_budget) + "\n";
  out += "agentkv_disk_evictions_total{reason=\"no_space\"} " + std::to_string(g.disk_evictions_no_space) + "\n";
  return out;
}

}  // namespace agentkv::sched
