#pragma once
// Prefill and decode speed of one engine context (one KV type): the
// measurement behind `agentkv bench kvtypes`.

#include <cstdint>
#include <span>

#include "engine/context.h"
#include "util/status.h"

namespace agentkv::bench {

struct KvSpeedSample {
  int n_prompt = 0;
  int n_gen = 0;
  double prefill_ms = 0;  // the whole prompt, chunks of n_batch, logits for the last token only
  double decode_ms = 0;   // n_gen single-token decodes after the prompt, greedy

  double PrefillTokPerS() const { return prefill_ms > 0 ? n_prompt * 1000.0 / prefill_ms : 0; }
  double DecodeTokPerS() const { return decode_ms > 0 ? n_gen * 1000.0 / decode_ms : 0; }
};

// Clears slot 0, prefills `prompt` into it, decodes n_gen tokens one at a time
// (greedy), clears it again. REQUIRES prompt non-empty,
// prompt.size() + n_gen <= ctx.options().slot_ctx, n_gen >= 0.
// Decode errors are returned with the slot cleared.
Result<KvSpeedSample> MeasureKvSpeed(engine::Context& ctx, std::span<const int32_t> prompt, int n_gen);

}  // namespace agentkv::bench
