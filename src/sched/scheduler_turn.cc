// Scheduler, inference thread: admitting requests, restoring an agent's cache
// from the best tier, and committing it after a turn.
#include <algorithm>
#include <random>

#include "prefix/prefix_match.h"
#include "sched/admit_plan.h"
#include "sched/scheduler.h"
#include "sched/chat_request.h"
#include "sched/scheduler_types.h"
#include "sched/restore_slot.h"
#include "sched/turn_restore.h"
#include "sched/side_request.h"
#include "sched/turn_usage.h"
#include "store/store_ids.h"
#include "util/log.h"

namespace agentkv::sched {
void Scheduler::Admit() {
  // Requests that end here (cancelled, past their deadline) first; a fork
  // made for one of them goes with it.
  for (const AgentKey& key : waiting_.Expire(Clock::now(), options_.queue_timeout_ms, metrics_)) {
    --n_waiting_;
    DropUnstartedFork(key);
  }
  // Then the others, round-robin across tenants (TenantRoundRobin): not
  // FIFO, so one tenant's backlog does not take every slot that frees up.
  TenantRoundRobin::Counts running;
  for (const auto& a : active_) {
    if (!a->done) ++running[a->w->req.namespace_id];
  }
  n_waiting_ -= waiting_.AdmitRoundRobin(running, [this](Waiting& w) { return TryAdmit(w); });
}

void Scheduler::DropUnstartedFork(const AgentKey& key) {
  Agent* a = key.agent_id.empty() ? nullptr : table_.Find(key);
  // Never ran: a fork's copy of its source, nothing of its own (no slot, no
  // commit, nothing on disk).
  if (a == nullptr || !a->fork_source || a->busy || a->slot >= 0 || a->on_disk || a->version != 0) return;
  if (!waiting_.Wants(key)) table_.Erase(key);  // (else still wanted: it forks again)
}

bool Scheduler::TryAdmit(Waiting& w) {
  const bool explicit_id = !w.req.agent_id.empty();
  if (!explicit_id) {
    if (!tiers_.MergeNamespaceIndex(w.req.namespace_id)) return false;  // the disk's agents are on their way
    w.req.agent_id = table_.ResolveImplicit(w.req.namespace_id, w.prompt, w.req.isolated || !w.req.reuse_cache,
                                            options_.diverge_ratio);
  }
  const AgentKey key{w.req.namespace_id, w.req.agent_id};
  bool pending = false;  // its read is in flight (or it is being erased): keep waiting
  Agent* known = tiers_.FindForTurn(key, explicit_id, /*early=*/pipelined_, &pending);
  if (pending) return false;
  // A side request (sched/side_request.h) runs as a side agent of the one it
  // names, decided once: the rest of admission is the side agent's (its own
  // disk read, a fork of the named agent when they share enough). Chat only:
  // a raw completion has no system text or tools, and priming an agent with
  // a max_tokens 1 completion is a use of its own.
  if (explicit_id && w.req.kind == api::RequestKind::kChat && !w.side_checked) {
    w.side_checked = true;
    const int64_t max_tokens = w.req.sampling.max_tokens.value_or(options_.default_max_tokens);
    const SideDecision side = ClassifyRequest({known != nullptr ? std::string_view(known->seq.text) : "", w.prompt,
                                               w.head_bytes, known != nullptr ? known->head_bytes : 0, max_tokens});
    w.takes_over = side.takes_over;
    if (side.kind != SideKind::kMain) {
      w.side_of = key;
      w.req.parent_agent_id = side.fork_from_main ? key.agent_id : "";
      w.req.agent_id = SideAgentId(key.agent_id, std::string_view(w.prompt).substr(0, w.head_bytes));
      AKV_LOG_DEBUG("agent %s: %s side request -> %s", key.agent_id.c_str(), SideKindName(side.kind),
                    w.req.agent_id.c_str());
      return TryAdmit(w);
    }
  }
  // A new agent with a parent (a subagent) starts as a fork of the parent's
  // cache, as an implicit DIVERGE does; the parent must be known (its
  // namespace's index merged) and idle, else the child simply starts cold.
  Agent* parent = nullptr;
  if (known == nullptr && !w.req.parent_agent_id.empty() && w.req.parent_agent_id != w.req.agent_id) {
    parent = tiers_.FindParent({w.req.namespace_id, w.req.parent_agent_id}, &pending);
    if (pending) return false;
  }
  Agent& agent = known != nullptr ? *known : table_.GetOrAdd(key);
  // The decisions are PlanAdmit's (sched/admit_plan.h); this does them.
  const AdmitSteps steps = PlanAdmit({.has_tokens = !agent.seq.tokens.empty(),
                                      .is_fork = agent.fork_source.has_value(),
                                      .busy = agent.busy,
                                      .resident = agent.slot >= 0,
                                      .parent_ready = parent != nullptr && !parent->busy && !parent->seq.tokens.empty(),
                                      .takes_over = w.takes_over,
                                      .reuse_cache = w.req.reuse_cache,
                                      .isolated = w.req.isolated});
  if (steps.mark_isolated) agent.isolated = true;
  if (w.side_of) agent.side_of = w.side_of;
  // Whatever happens below (a fork's seq, a newer remote turn, busy): the
  // index and the table's size follow.
  struct ReindexOnExit {
    AgentTable& table;
    Agent* a;  // null: erased
    ~ReindexOnExit() {
      if (a != nullptr) table.Reindex(*a);
    }
  } reindex_on_exit{table_, &agent};
  if (steps.fork_parent) {
    agent.seq = parent->seq;
    agent.fork_source = parent->key;
  }
  if (steps.wait) return false;
  if (steps.clear_slot) {
    ctx_.ClearSlot(agent.slot);
    slots_.Set(agent.slot, nullptr);
  }
  if (steps.drop_cache) {
    w.takes_over = false;
    agent.seq = {};
    agent.fork_source.reset();
  }
  // (A request with cache_prompt false starts cold: `source` stays kCold.)
  RestoreSource source;
  const DonorChoice::Kind donor = steps.try_donor ? SeedFromDonor(w, agent, &source) : DonorChoice::Kind::kNone;
  if (donor == DonorChoice::Kind::kWaitForLeader) return false;
  if (w.req.reuse_cache && donor != DonorChoice::Kind::kLeader && !FindRestoreSource(agent, &source)) return false;
  const int slot = slots_.Acquire(agent, [](int) { return true; }, [this](int s) {
    ctx_.ClearSlot(s);  // an idle agent's: committed to the pool when its turn ended (its save may still run)
    metrics_.CountEviction("slot");
  });
  if (slot < 0) return false;  // the read stays for the next attempt
  // Taken (a pipelined restore takes its read once it completes).
  if (source.read_key && !source.pipelined) tiers_.DropRead(*source.read_key);

  auto a = std::make_unique<Active>();
  a->w = std::make_unique<Waiting>(std::move(w));
  const bool from_leader = source.leader != nullptr;
  Status s = Prepare(*a->w, agent, slot, a.get(), std::move(source));
  if (!s.ok()) {
    a->w->sink->OnError(s);
    metrics_.CountRequest("error");
    const FailedAdmitUndo undo =
        PlanFailedAdmit({.from_leader = from_leader,
                         .owns_nothing = agent.version == 0 && !agent.on_disk && agent.slot < 0,
                         .resident = agent.slot >= 0,
                         .slot_written = ctx_.SlotLength(slot) > 0,
                         .is_fork = agent.fork_source.has_value()});
    if (undo.forget_leader_seq) agent.seq = {};
    if (a->w->own_before_seed) {  // a returning agent's own cache is still its own
      agent.seq = std::move(*a->w->own_before_seed);
      agent.fork_source.reset();
    }
    if (undo.clear_slot) ctx_.ClearSlot(slot);
    if (undo.drop_fork) {
      reindex_on_exit.a = nullptr;
      DropUnstartedFork(AgentKey(agent.key));  // a copy: the key dies with the agent
    }
    return true;
  }
  agent.busy = true;
  agent.last_use_ms = NowMs();
  agent.head_bytes = a->w->head_bytes;
  if (a->w->prompt_entry) tiers_.RememberPrompt(agent.key, std::move(a->w->prompt_entry));
  slots_.Set(slot, &agent);
  a->w->sink->OnPromptUsage(a->usage);
  a->w->sink->OnStart();
  active_.push_back(std::move(a));
  n_active_ = active_.size();
  return true;
}

bool Scheduler::FindRestoreSource(Agent& agent, RestoreSource* source) {
  if (agent.slot >= 0) {
    source->state = api::CacheState::kResident;
    return true;
  }
  if (agent.seq.tokens.empty()) return true;  // cold
  const AgentKey from = agent.fork_source.value_or(agent.key);
  if (auto snap = pool_.Get(from); snap.ok()) {
    source->state = api::CacheState::kHot;
    source->blocks = std::move(snap->blocks);
    return true;
  }
  if (!tiers_.has_store()) return true;  // cold
  ReadLookup found = tiers_.Lookup(from, agent.version);  // posts a read if none runs
  if (found.kind == ReadLookup::Kind::kPosted) return false;
  if (found.kind == ReadLookup::Kind::kInFlight) return PipelinedSource(from, found.landing, agent, source);
  AgentRead& read = found.read;
  if (read.record && !agent.fork_source) {
    // Known here, but another server advanced it since: its newer turn.
    agent.seq = SequenceOf(*read.record);
    agent.version = read.record->version;
  }
  source->state = read.from_remote ? api::CacheState::kRemote
                  : read.from_disk  ? api::CacheState::kWarm
                                    : api::CacheState::kHot;
  source->blocks = std::move(read.blocks);  // shared blocks: no copy of the KV
  source->landing = std::move(read.landing);
  source->read_ms = read.read_ms;
  // Left in AgentTiers until the turn gets a slot (TryAdmit): a request that
  // waits for one meanwhile must not read (or fetch) the agent again.
  source->read_key = from;
  return true;
}

Status Scheduler::Prepare(Waiting& w, Agent& agent, int slot, Active* a, RestoreSource source) {
  // The grammar was compiled and checked in Submit: this cannot fail.
  const auto& sp = w.req.sampling;
  engine::SamplingParams params{sp.temperature, sp.top_k, sp.top_p,
                                sp.seed ? static_cast<uint64_t>(*sp.seed) : std::random_device{}()};
  auto sampler = std::make_unique<engine::Sampler>(params, w.grammar);
  const double wait_ms = std::chrono::duration<double, std::milli>(Clock::now() - w.received).count();
  // The cache the turn starts from is another agent's (a fork or a leader's slot).
  std::optional<AgentKey> shared_from = agent.fork_source;
  if (source.leader != nullptr) {
    agent.seq = source.leader->seq;
    shared_from = source.leader->key;
  }
  const uint32_t cached_tokens = static_cast<uint32_t>(agent.seq.tokens.size());
  api::CacheState state = source.state;
  uint32_t available = 0;
  std::vector<PoolBlock>& blocks = source.blocks;
  if (source.leader != nullptr) {
    available = std::min<uint32_t>(static_cast<uint32_t>(ctx_.SlotLength(source.leader->slot)), cached_tokens);
  } else if (state == api::CacheState::kResident) {
    available = static_cast<uint32_t>(ctx_.SlotLength(slot));
  } else if (source.pipelined) {
    available = source.landing->n_tokens();  // PipelinedSource checked its blocks' ids
  } else if (!blocks.empty()) {
    available = RestorableTokens(&blocks, agent.seq.tokens, ctx_.spec());
  }

  // A seeded agent reuses any common prefix: the donor was chosen for it (sched/prefix_donor.h).
  TurnPlan plan =
      PlanTurn(tokenizer_, w.fresh, agent.seq, w.prompt, available, {w.seeded ? 0.0 : options_.diverge_ratio});
  if (plan.n_keep > 0) {
    TurnRestore restored = StartTurnRestore(ctx_, tiers_, metrics_, source, slot, static_cast<uint32_t>(plan.n_keep));
    a->usage.restore_ms = restored.restore_ms;
    a->restore = std::move(restored.pipelined);
    if (restored.landed) metrics_.CountLandedRestore();
    if (restored.status.ok() && source.from_blocks()) {
      a->restored_blocks = blocks;
      if ((state == api::CacheState::kWarm || state == api::CacheState::kRemote) && !agent.fork_source) {
        (void)pool_.Put(agent.key, blocks, /*dirty=*/false);  // hot next time, if it fits
      }
    }
    if (!restored.status.ok()) {
      AKV_LOG_WARN("restore of agent %s failed (%s); prefilling cold", agent.key.agent_id.c_str(),
                   restored.status.ToString().c_str());
      plan = PlanTurn(tokenizer_, w.fresh, agent.seq, w.prompt, 0);
    }
  }
  if (plan.n_keep == 0) {
    state = api::CacheState::kCold;
    ctx_.ClearSlot(slot);
    shared_from.reset();
  }
  // A prompt refused after a pipelined restore began: the restore is
  // abandoned, not waited for, and the slot cleared.
  auto drop_slot = [&] {
    if (a->restore) AbandonPipelined(*a);
    ctx_.ClearSlot(slot);
  };
  if (plan.new_tokens.empty()) {
    if (a->restore) drop_slot();
    return Status::InvalidArgument("prompt: nothing to evaluate (empty prompt)");
  }
  const int64_t prompt_tokens = plan.n_keep + static_cast<int64_t>(plan.new_tokens.size());
  if (prompt_tokens >= ctx_.options().slot_ctx) {
    drop_slot();
    return Status::InvalidArgument("prompt: " + std::to_string(prompt_tokens) + " tokens do not fit the context of " +
                                   std::to_string(ctx_.options().slot_ctx));
  }
  a->usage.respelled_tokens = RespelledTokens(w.fresh, agent.seq, plan.n_keep);
  agent.fork_source.reset();
  a->committed_seq = agent.seq;
  agent.seq.prompt = PromptPrefixOf(w.fresh, w.prompt, w.plain, agent.seq, plan);
  agent.seq.tokens.resize(plan.n_keep);
  agent.seq.spans.resize(plan.n_keep);
  agent.seq.text = w.prompt;

  a->agent = &agent;
  a->slot = slot;
  a->shared_from = shared_from;
  a->pending = std::move(plan.new_tokens);
  a->pending_spans = std::move(plan.new_spans);
  a->sampler = std::move(sampler);
  a->reply = std::make_unique<ReplyEmitter>(*w.sink, sp.stop, w.reply_format);
  a->max_tokens = sp.max_tokens.value_or(options_.default_max_tokens);
  a->usage.agent_id = agent.key.agent_id;
  if (w.side_of) a->usage.side_of = w.side_of->agent_id;
  SetPromptUsage(plan, a->pending.size(), state, shared_from.has_value(), &a->usage);
  if (shared_from) metrics_.AddSharedPrefix(source.leader != nullptr ? "slot" : api::CacheStateName(state), plan.n_keep);
  a->usage.read_ms = source.read_ms;
  a->usage.wait_ms = wait_ms;
  metrics_.CountMatch(api::MatchTypeName(a->usage.match));
  metrics_.AddTokens(a->pending.size(), plan.n_keep, 0);
  return Status::OK();
}

}  // namespace agentkv::sched
