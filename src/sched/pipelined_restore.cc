#include "sched/pipelined_restore.h"

#include <algorithm>
#include <thread>

#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv::sched {
namespace {

// The gate of a pipelined first decode: waits for each layer's rows (polling
// the import) unless something else wants the thread (`yield_now`), then
// gives up (yields).
class YieldingGate : public engine::LayerGate {
 public:
  YieldingGate(engine::LayerGatedImport& import, const std::function<bool()>& yield_now)
      : import_(import), yield_now_(yield_now) {}
  bool WaitLayer(int il) override {
    import_.NoteWaited(il);
    const auto start = std::chrono::steady_clock::now();
    bool in = true;
    while (!import_.LayerIn(il)) {
      if (import_.Ended()) {  // its rows came just now, or never will
        in = import_.LayerIn(il);
        break;
      }
      if (yield_now_()) {  // a request, a task or the stop came: do not hold it up
        yielded_ = true;
        in = false;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    const auto end = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(end - start).count();
    waited_ms_ += ms;
    if (ms > 0.1) ++layers_waited_;
    last_wait_end_ = end;
    return in;
  }
  bool LayerReady(int il) override { return import_.LayerReady(il); }  // computes on through it
  bool yielded() const { return yielded_; }
  // When the last stop ended (the decode's start if it never stopped).
  std::chrono::steady_clock::time_point last_wait_end() const { return last_wait_end_; }
  double waited_ms() const { return waited_ms_; }    // for rows, in all
  int layers_waited() const { return layers_waited_; }  // layers whose rows were not all in yet

 private:
  engine::LayerGatedImport& import_;
  const std::function<bool()>& yield_now_;
  bool yielded_ = false;
  std::chrono::steady_clock::time_point last_wait_end_ = std::chrono::steady_clock::now();
  double waited_ms_ = 0;
  int layers_waited_ = 0;
};

}  // namespace

bool PipelinedRestore::Matches(const ReadLanding::Ticket& landing, const std::vector<int32_t>& tokens,
                               std::string_view fingerprint) {
  if (!landing.Planned()) return false;
  const std::vector<std::string>& planned = landing.planned_ids();
  if (planned.empty() || landing.n_tokens() != tokens.size() || ComputeBlockIds(fingerprint, tokens) != planned) {
    return false;
  }
  if (std::shared_ptr<const AgentRecord> rec = landing.EarlyRecord(); rec != nullptr) {
    if (rec->tokens != tokens || rec->blocks.size() != planned.size()) return false;
    for (size_t i = 0; i < planned.size(); ++i) {
      if (rec->blocks[i].id != planned[i]) return false;
    }
  }
  return true;
}

PipelinedRestore::PipelinedRestore(engine::Context& ctx, AgentTiers& tiers, SchedulerMetrics& metrics,
                                   std::shared_ptr<ReadLanding::Ticket> landing,
                                   std::unique_ptr<engine::LayerGatedImport> import, const AgentKey& read_key)
    : ctx_(ctx), tiers_(tiers), metrics_(metrics), landing_(std::move(landing)), import_(std::move(import)), read_key_(read_key) {}

PipelinedRestore::~PipelinedRestore() = default;

Result<std::unique_ptr<PipelinedRestore>> PipelinedRestore::Start(engine::Context& ctx, AgentTiers& tiers,
                                                                  SchedulerMetrics& metrics, int slot, uint32_t n_keep,
                                                                  std::shared_ptr<ReadLanding::Ticket> landing,
                                                                  const AgentKey& read_key) {
  auto import = engine::LayerGatedImport::Start(ctx, slot, landing->state(), *landing->writer(),
                                                &ReadLanding::Ticket::WaitFn, landing.get());
  if (!import.ok()) {
    tiers.DropRead(read_key);
    return import.status();
  }
  // The landing holds every position; the turn keeps n_keep (cells only:
  // the import thread copies rows).
  if (n_keep < landing->n_tokens()) {
    if (Status s = ctx.TruncateSlot(slot, static_cast<int32_t>(n_keep)); !s.ok()) {
      landing->Abandon();  // the import then ends without waiting for the read
      (void)(*import)->Finish();
      ctx.ClearSlot(slot);
      tiers.DropRead(read_key);
      return s;
    }
  }
  return std::unique_ptr<PipelinedRestore>(
      new PipelinedRestore(ctx, tiers, metrics, std::move(landing), std::move(import).value(), read_key));
}

bool PipelinedRestore::WaitRead(const std::function<bool()>& give_up) const {
  for (;;) {
    if (tiers_.WaitReadDone(read_key_, std::chrono::milliseconds(1))) return true;
    if (give_up()) return false;
  }
}

bool PipelinedRestore::DecodeGated(const std::vector<engine::BatchItem>& items,
                                   const std::function<bool()>& yield_now, Status* decoded) {
  YieldingGate gate(*import_, yield_now);
  const auto start = std::chrono::steady_clock::now();
  *decoded = ctx_.DecodeGated(items, &gate);
  // Where a pipelined turn's time went (AGENTKV_LOG=debug; bench/RESULTS.md, stop 14).
  const auto end = std::chrono::steady_clock::now();
  AKV_LOG_DEBUG("pipelined restore of agent %s: gated decode of %zu tokens %.2f ms, %.2f ms of it waiting for the "
                "rows of %d layers, %.2f ms after its last wait%s",
                read_key_.agent_id.c_str(), items.size(),
                std::chrono::duration<double, std::milli>(end - start).count(), gate.waited_ms(),
                gate.layers_waited(), std::chrono::duration<double, std::milli>(end - gate.last_wait_end()).count(),
                gate.yielded() ? "; yielded to a request, a task or the stop" : "");
  // Usable: every layer's rows were in before it was computed (so the import
  // waits for nothing more).
  return !gate.yielded() && decoded->ok() && import_->CoveredAllLayers();
}

bool PipelinedRestore::Resolve(const std::vector<int32_t>& tokens, AgentRead* read) {
  const Status imported = import_->Finish();  // ended, or ends without waiting (every row is in)
  import_.reset();
  *read = tiers_.TakeRead(read_key_).value_or(AgentRead{});  // completed: no wait
  const bool verified = read->done && read->from_disk && read->record && read->record->tokens == tokens &&
                        read->blocks.size() == landing_->planned_ids().size() &&
                        !landing_->StateFor(read->blocks).empty();
  if (!imported.ok() || !verified) {
    AKV_LOG_WARN("pipelined restore of agent %s not usable (import: %s; read verified: %d); prefilling cold",
                 read_key_.agent_id.c_str(), imported.ToString().c_str(), verified);
    metrics_.CountPipelinedRestore(/*fell_back=*/true);
    return false;
  }
  metrics_.CountLandedRestore();
  metrics_.CountPipelinedRestore(/*fell_back=*/false);
  return true;
}

void DrainingImports::Add(std::unique_ptr<PipelinedRestore> restore, int slot) {
  restore->landing_->Abandon();  // the import's waits end; the read writes no more rows
  restore->tiers_.DropRead(restore->read_key_);  // its result, when it comes, is discarded
  restore->metrics_.CountPipelinedAbandoned();
  drains_.push_back({std::move(restore), slot});
}

bool DrainingImports::Draining(int slot) const {
  return std::any_of(drains_.begin(), drains_.end(), [slot](const Drain& d) { return d.slot == slot; });
}

void DrainingImports::Reap(engine::Context& ctx, bool wait) {
  std::erase_if(drains_, [&](Drain& d) {
    if (!wait && !d.restore->ImportEnded()) return false;
    (void)d.restore->import_->Finish();  // its landing was abandoned: it waits for no read
    ctx.ClearSlot(d.slot);
    return true;
  });
}

}  // namespace agentkv::sched
