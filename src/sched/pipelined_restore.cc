#include "sched/pipelined_restore.h"

#include <utility>

#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv::sched {
namespace {

// The gate of a pipelined first decode: imports each layer whose rows are
// in as the decode reaches it; for one that is not, waits for its rows in
// slices of `poll` (ReadLanding::Ticket::WaitLanded wakes it as they land),
// giving the decode up when they never will or yield_now() says so.
class ImportingGate : public engine::LayerGate {
 public:
  ImportingGate(engine::LayerGatedImport& import, const std::function<bool()>& yield_now,
                std::chrono::microseconds poll)
      : import_(import), yield_now_(yield_now), poll_(poll) {}
  bool LayerReady(int il) override { return import_.ImportIfLanded(il); }  // computes on through it
  bool WaitLayer(int il) override {
    const auto start = std::chrono::steady_clock::now();
    bool in = false;
    while (!(in = import_.ImportWhenLanded(il, poll_))) {
      if (import_.RowsFinal()) break;  // they never will
      if (yield_now_()) {  // a request, a task, the stop or the cancellation came: do not hold it up
        yielded_ = true;
        break;
      }
    }
    const auto end = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(end - start).count();
    waited_ms_ += ms;
    if (ms > 0.1) ++layers_waited_;
    last_wait_end_ = end;
    return in;
  }
  bool yielded() const { return yielded_; }
  // When the last stop ended (the decode's start if it never stopped).
  std::chrono::steady_clock::time_point last_wait_end() const { return last_wait_end_; }
  double waited_ms() const { return waited_ms_; }    // for rows, in all
  int layers_waited() const { return layers_waited_; }  // layers whose rows were not all in yet

 private:
  engine::LayerGatedImport& import_;
  const std::function<bool()>& yield_now_;
  const std::chrono::microseconds poll_;
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
                                   std::shared_ptr<ReadLanding::Ticket> landing, const AgentKey& read_key)
    : ctx_(ctx), tiers_(tiers), metrics_(metrics), landing_(std::move(landing)), read_key_(read_key) {}

PipelinedRestore::~PipelinedRestore() = default;

Result<std::unique_ptr<PipelinedRestore>> PipelinedRestore::Start(engine::Context& ctx, AgentTiers& tiers,
                                                                  SchedulerMetrics& metrics, int slot, uint32_t n_keep,
                                                                  std::shared_ptr<ReadLanding::Ticket> landing,
                                                                  const AgentKey& read_key) {
  std::unique_ptr<PipelinedRestore> r(new PipelinedRestore(ctx, tiers, metrics, std::move(landing), read_key));
  const ReadLanding::Ticket& t = *r->landing_;
  auto import = engine::LayerGatedImport::Start(ctx, slot, t.state(), *t.writer(), r->landing_.get());
  if (!import.ok()) {
    tiers.DropRead(read_key);  // (the slot was cleared)
    return import.status();
  }
  r->import_ = std::move(import).value();
  // The landing holds every position; the turn keeps n_keep (cells only:
  // no row is copied yet).
  if (n_keep < t.n_tokens()) {
    if (Status s = ctx.TruncateSlot(slot, static_cast<int32_t>(n_keep)); !s.ok()) {
      r->landing_->Abandon();  // waits for no disk
      r->import_.reset();
      ctx.ClearSlot(slot);
      tiers.DropRead(read_key);
      return s;
    }
  }
  return r;
}

bool PipelinedRestore::WaitRead(const std::function<bool()>& give_up) const {
  for (;;) {
    if (tiers_.WaitReadDone(read_key_, std::chrono::milliseconds(1))) return true;
    if (give_up()) return false;
  }
}

bool PipelinedRestore::DecodeGated(const std::vector<engine::BatchItem>& items,
                                   const std::function<bool()>& yield_now, Status* decoded,
                                   std::chrono::microseconds poll) {
  ImportingGate gate(*import_, yield_now, poll);
  const auto start = std::chrono::steady_clock::now();
  *decoded = ctx_.DecodeGated(items, &gate);
  // Where a pipelined turn's time went (AGENTKV_LOG=debug; bench/HISTORY.md, stop 14).
  const auto end = std::chrono::steady_clock::now();
  AKV_LOG_DEBUG("pipelined restore of agent %s: gated decode of %zu tokens %.2f ms, %.2f ms of it waiting for the "
                "rows of %d layers, %.2f ms after its last wait%s",
                read_key_.agent_id.c_str(), items.size(),
                std::chrono::duration<double, std::milli>(end - start).count(), gate.waited_ms(),
                gate.layers_waited(), std::chrono::duration<double, std::milli>(end - gate.last_wait_end()).count(),
                gate.yielded() ? "; yielded to a request, a task, the stop or the cancellation" : "");
  // Usable: every layer was in before it was computed (nothing imports
  // during the decode but its gate, so Complete() right after it says so).
  return !gate.yielded() && decoded->ok() && import_->Complete();
}

bool PipelinedRestore::Resolve(const std::vector<int32_t>& tokens, AgentRead* read) {
  const bool complete = import_->ImportLanded();  // no wait: the read completed, nothing more lands
  import_.reset();
  *read = tiers_.TakeRead(read_key_).value_or(AgentRead{});  // completed: no wait
  const bool verified = read->done && read->from_disk && read->record && read->record->tokens == tokens &&
                        read->blocks.size() == landing_->planned_ids().size() &&
                        !landing_->StateFor(read->blocks).empty();
  if (!complete || !verified) {
    AKV_LOG_WARN("pipelined restore of agent %s not usable (every layer in: %d; read verified: %d); prefilling cold",
                 read_key_.agent_id.c_str(), complete, verified);
    metrics_.CountPipelinedRestore(/*fell_back=*/true);
    return false;
  }
  metrics_.CountLandedRestore();
  metrics_.CountPipelinedRestore(/*fell_back=*/false);
  return true;
}

void PipelinedRestore::Abandon() {
  landing_->Abandon();          // the read copies no more rows; waits for no disk
  tiers_.DropRead(read_key_);   // its result, when it comes, is discarded
  import_.reset();
  metrics_.CountPipelinedAbandoned();
}

}  // namespace agentkv::sched
