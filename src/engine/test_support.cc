#include "engine/test_support.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fstream>
#include <sstream>

#include "engine/sampler.h"

namespace agentkv::engine::testing {

std::string BundledModelPath() { return std::string(AGENTKV_SOURCE_DIR) + "/models/tiny-llama-brown-16m-q8_0.gguf"; }

std::string SampleText(size_t bytes) {
  std::ifstream f(std::string(AGENTKV_SOURCE_DIR) + "/models/brown_test.txt");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str().substr(0, bytes);
}

Result<std::vector<float>> Prefill(Context& ctx, int slot, const std::vector<int32_t>& tokens) {
  return PrefillInChunks(ctx, slot, tokens, static_cast<size_t>(ctx.options().n_batch));
}

Result<std::vector<float>> PrefillInChunks(Context& ctx, int slot, const std::vector<int32_t>& tokens, size_t chunk) {
  int32_t pos = ctx.SlotLength(slot);
  std::vector<BatchItem> items;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    items.clear();
    const size_t end = std::min(tokens.size(), i + chunk);
    for (size_t j = i; j < end; ++j) items.push_back({slot, tokens[j], pos++, j + 1 == tokens.size()});
    AGENTKV_RETURN_IF_ERROR(ctx.Decode(items));
  }
  auto row = ctx.Logits(static_cast<int>(items.size()) - 1);
  return std::vector<float>(row.begin(), row.end());
}

Result<std::vector<int32_t>> GreedyDecode(Context& ctx, int slot, std::vector<float> logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t tok = Sampler::Greedy(logits);
    out.push_back(tok);
    BatchItem item{slot, tok, ctx.SlotLength(slot), true};
    AGENTKV_RETURN_IF_ERROR(ctx.Decode({&item, 1}));
    auto row = ctx.Logits(0);
    logits.assign(row.begin(), row.end());
  }
  return out;
}

Result<GreedyRun> GreedyDecodeWithGaps(Context& ctx, int slot, std::vector<float> logits, int n) {
  GreedyRun run;
  for (int i = 0; i < n; ++i) {
    const int32_t tok = Sampler::Greedy(logits);
    float second = -std::numeric_limits<float>::infinity();
    for (size_t j = 0; j < logits.size(); ++j) {
      if (static_cast<int32_t>(j) != tok) second = std::max(second, logits[j]);
    }
    run.tokens.push_back(tok);
    run.top2_gap.push_back(logits[static_cast<size_t>(tok)] - second);
    BatchItem item{slot, tok, ctx.SlotLength(slot), true};
    AGENTKV_RETURN_IF_ERROR(ctx.Decode({&item, 1}));
    auto row = ctx.Logits(0);
    logits.assign(row.begin(), row.end());
  }
  return run;
}

size_t StepsBeforeNearTie(const GreedyRun& a, const GreedyRun& b, float tie) {
  size_t n = 0;
  while (n < a.tokens.size() && n < b.tokens.size() && a.top2_gap[n] >= tie && b.top2_gap[n] >= tie) ++n;
  return n;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  constexpr float kFail = std::numeric_limits<float>::infinity();
  if (a.size() != b.size() || a.empty()) return kFail;
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float x = std::abs(a[i] - b[i]);
    if (!std::isfinite(x)) return kFail;
    d = std::max(d, x);
  }
  return d;
}

int32_t Argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace agentkv::engine::testing
