#pragma once
// Prefix donors (issue 32, docs/api.md "Shared prefixes"): which other agent's
// cache a turn starts from, so that agents of a namespace sharing a system
// text and tools compute it once.
//
// A turn whose agent holds no cache of its own (a new agent, or one whose
// cache is gone), or whose own cache shares kMinSharedPrefixBytes less of
// the prompt than a donor's, starts from the longest prefix of its rendered
// prompt that another agent of its namespace has cached, instead of
// prefilling it:
//   - an idle donor (any tier: slot, RAM pool, disk), found through the
//     namespace's prefix index of idle agents' texts, is restored like an
//     implicit fork: its blocks are only read, the donor stays as it was;
//   - a leader, an agent whose turn is running and whose prompt shares the
//     prefix: once the leader's slot holds the common prefix, the turn copies
//     those positions from the leader's slot (engine::Context::CopySlotPrefix).
//     Until then it waits, so agents that arrive together with the same new
//     prefix prefill it once instead of side by side.
// Never across namespaces, never for a request of an isolated key, never
// from an isolated agent (the scheduler does not offer them). A tenant
// learns from usage.cached_tokens / shared_tokens only that some agent of
// its own namespace has sent the same prefix: what its own agents could
// list anyway (GET /v1/agents).
//
// What is decided here is a pure function of the candidates' lengths
// (ChooseDonor); the scheduler gathers them (scheduler_share.cc).
// Thread-compatible.

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace agentkv::sched {

// A donor must share at least this many bytes of the prompt (~250 tokens):
// below it the restore's fixed cost buys little.
inline constexpr size_t kMinSharedPrefixBytes = 1024;
// An idle donor whose blocks live only on disk is read whole (its manifest
// and every block), so it must share at least this fraction of its text:
// else reading it costs more than prefilling what it shares.
inline constexpr double kMinDiskDonorShare = 0.25;

struct IdleDonor {
  size_t common_bytes = 0;  // of its text with the prompt
  size_t text_bytes = 0;
  bool in_ram = false;  // in a slot or the RAM pool (else only on disk or remote)
};

struct Leader {
  size_t common_bytes = 0;  // of its turn's prompt with this prompt
  // Bytes of its prompt its slot has computed (the end of its last computed
  // token's text); the whole prompt once its prefill is done.
  size_t computed_bytes = 0;
  bool prefill_done = false;
};

struct DonorChoice {
  enum class Kind {
    kNone,           // prefill (or restore the agent's own cache) as usual
    kIdle,           // fork the idle donor's cache
    kLeader,         // copy the leader's slot prefix now
    kWaitForLeader,  // keep waiting: the leader has not computed the common prefix yet
  };
  Kind kind = Kind::kNone;
  size_t leader = 0;        // kLeader / kWaitForLeader: index into the leaders
  size_t common_bytes = 0;  // what the donor shares with the prompt
};

// `own_common_bytes`: what the agent's own cache shares with the prompt (0
// for a new agent). A donor must share kMinSharedPrefixBytes more than that.
// The idle donor wins ties (it is restorable now); a leader that shares
// more waits for its prefill, unless it shares less than
// kMinSharedPrefixBytes more than the idle donor (then the idle one now).
DonorChoice ChooseDonor(size_t own_common_bytes, const std::optional<IdleDonor>& idle,
                        std::span<const Leader> leaders);

}  // namespace agentkv::sched
