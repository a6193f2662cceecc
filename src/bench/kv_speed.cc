#include "bench/kv_speed.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <vector>

#include "bench/stats.h"
#include "engine/sampler.h"

namespace agentkv::bench {

Result<KvSpeedSample> MeasureKvSpeed(engine::Context& ctx, std::span<const int32_t> prompt, int n_gen) {
  assert(!prompt.empty() && n_gen >= 0);
  assert(prompt.size() + static_cast<size_t>(n_gen) <= static_cast<size_t>(ctx.options().slot_ctx));
  KvSpeedSample sample;
  sample.n_prompt = static_cast<int>(prompt.size());
  sample.n_gen = n_gen;
  ctx.ClearSlot(0);
  auto fail = [&ctx](const Status& s) {
    ctx.ClearSlot(0);
    return s.WithContext("kv speed");
  };

  const size_t n_batch = static_cast<size_t>(ctx.options().n_batch);
  std::vector<engine::BatchItem> items;
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < prompt.size(); i += n_batch) {
    items.clear();
    const size_t end = std::min(prompt.size(), i + n_batch);
    for (size_t j = i; j < end; ++j) {
      items.push_back({0, prompt[j], static_cast<int32_t>(j), j + 1 == prompt.size()});
    }
    if (Status s = ctx.Decode(items); !s.ok()) return fail(s);
  }
  int32_t next = engine::Sampler::Greedy(ctx.Logits(static_cast<int>(items.size()) - 1));
  sample.prefill_ms = MsSince(t0);

  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n_gen; ++i) {
    engine::BatchItem item{0, next, static_cast<int32_t>(prompt.size()) + i, true};
    if (Status s = ctx.Decode({&item, 1}); !s.ok()) return fail(s);
    next = engine::Sampler::Greedy(ctx.Logits(0));
  }
  sample.decode_ms = MsSince(t0);
  ctx.ClearSlot(0);
  return sample;
}

}  // namespace agentkv::bench
