#pragma once
// Restoring an agent's cache into a slot from its blocks (the hot, warm and
// remote tiers): which of the blocks belong to its tokens and how much of
// them can be restored, and the import itself, from the read landing's
// state when the blocks all landed there (no per-block conversion left for
// the inference thread), else from the blocks.
//
// Thread safety: the inference thread (it drives the llama context).

#include <cstdint>
#include <vector>

#include "engine/cache_spec.h"
#include "engine/context.h"
#include "kv/block_pool.h"
#include "sched/read_landing.h"

namespace agentkv::sched {

// Cuts *blocks to those whose ids are the ids `tokens` imply (under the
// spec's fingerprint) and returns how many of the tokens they can restore
// (engine::RestorablePrefix; 0 without blocks).
uint32_t RestorableTokens(std::vector<PoolBlock>* blocks, const std::vector<int32_t>& tokens,
                          const engine::ModelCacheSpec& spec);

// Restores positions [0, n_keep) of `blocks` into `slot` (cleared first).
// From `landing` (may be null) when it holds every block and n_keep tokens;
// a failure there falls back to the blocks. *landed: whether the landing
// served it. On failure the slot's contents are unknown (clear it).
Status RestoreSlot(engine::Context& ctx, int slot, const std::vector<PoolBlock>& blocks, uint32_t n_keep,
                   const ReadLanding::Ticket* landing, bool* landed);

}  // namespace agentkv::sched
