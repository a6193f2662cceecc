#include "sched/pipelined_restore.h"

#include <utility>

namespace agentkv::sched {
namespace {

// The gate of a pipelined first decode: imports each layer whose rows are
// in as the decode reaches it; for one that is not, waits for its rows in
// slices of `poll`, giving the decode up when give_way() says so.
class ImportingGate : public engine::LayerGate {
 public:
  ImportingGate(engine::LayerGatedImport& import, const std::function<bool()>& give_way,
                std::chrono::microseconds poll, PipelinedRestore::DecodeStats* stats)
      : import_(import), give_way_(give_way), poll_(poll), stats_(stats) {}
  bool LayerReady(int il) override { return import_.ImportIfLanded(il); }
  bool WaitLayer(int il) override {
    const auto start = std::chrono::steady_clock::now();
    bool in = false;
    while (!(in = import_.ImportWhenLanded(il, poll_))) {
      if (import_.RowsFinal()) break;  // they never will
      if (give_way_()) {
        stats_->gave_way = true;
        break;
      }
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    stats_->waited_ms += ms;
    if (ms > 0.1) ++stats_->layers_waited;
    return in;
  }

 private:
  engine::LayerGatedImport& import_;
  const std::function<bool()>& give_way_;
  const std::chrono::microseconds poll_;
  PipelinedRestore::DecodeStats* stats_;
};

}  // namespace

bool PipelinedRestore::Matches(const ReadLanding::Ticket& landing, const std::vector<std::string>& block_ids,
                               const std::vector<int32_t>& tokens) {
  if (!landing.Planned()) return false;
  const std::vector<std::string>& planned = landing.planned_ids();
  if (planned.empty() || block_ids != planned || landing.n_tokens() != tokens.size()) return false;
  if (std::shared_ptr<const AgentRecord> rec = landing.EarlyRecord(); rec != nullptr) {
    if (rec->tokens != tokens || rec->blocks.size() != planned.size()) return false;
    for (size_t i = 0; i < planned.size(); ++i) {
      if (rec->blocks[i].id != planned[i]) return false;
    }
  }
  return true;
}

Result<std::unique_ptr<PipelinedRestore>> PipelinedRestore::Start(engine::Context& ctx, int slot, uint32_t n_keep,
                                                                  std::shared_ptr<ReadLanding::Ticket> landing,
                                                                  AgentKey read_key) {
  std::unique_ptr<PipelinedRestore> r(new PipelinedRestore(std::move(landing), std::move(read_key)));
  const ReadLanding::Ticket& t = *r->landing_;
  auto import = engine::LayerGatedImport::Start(ctx, slot, t.state(), *t.writer(), r->landing_.get());
  if (!import.ok()) return import.status();
  r->import_ = std::move(import).value();
  // The landing holds every position; the turn keeps n_keep (cells only).
  if (n_keep < t.n_tokens()) {
    if (Status s = ctx.TruncateSlot(slot, static_cast<int32_t>(n_keep)); !s.ok()) {
      r->Abandon();
      ctx.ClearSlot(slot);
      return s;
    }
  }
  return r;
}

Status PipelinedRestore::DecodeFirstChunk(engine::Context& ctx, std::span<const engine::BatchItem> items,
                                          const std::function<bool()>& give_way, DecodeStats* stats,
                                          std::chrono::microseconds poll) {
  ImportingGate gate(*import_, give_way, poll, stats);
  return ctx.DecodeGated(items, &gate);
}

void PipelinedRestore::Abandon() {
  landing_->Abandon();  // the read copies no more rows; waits for no disk
  import_.reset();
}

}  // namespace agentkv::sched
