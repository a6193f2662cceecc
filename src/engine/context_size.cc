#include "engine/context_size.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "engine/model.h"
#include "ggml-backend.h"

namespace agentkv::engine {
namespace {

std::string Gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

}  // namespace

ContextSizeChoice ChooseSlotContext(const ContextSizeInput& in) {
  ContextSizeChoice out;
  const int32_t trained = in.n_ctx_train > 0 ? in.n_ctx_train : kMinDefaultContextTokens;
  const int32_t floor_tokens = std::min(kMinDefaultContextTokens, trained);
  // The trained context in whole blocks, unless it is less than one block's worth of them.
  int32_t chosen = trained >= kContextGranuleTokens ? trained / kContextGranuleTokens * kContextGranuleTokens : trained;
  out.reason = "the model's trained context" + (in.n_ctx_train > 0 ? std::string() : std::string(" (unknown: floor)"));
  if (in.kv_bytes_per_token == 0 || in.n_slots <= 0) {
    out.slot_ctx = chosen;
    return out;
  }
  const bool host_shares = in.host_available_bytes == 0;
  const auto fit_tokens = [](uint64_t available, uint64_t per_token) {
    const double usable = static_cast<double>(available) * (1.0 - kContextHeadroomFraction);
    return static_cast<int64_t>(usable / static_cast<double>(per_token)) / kContextGranuleTokens *
           kContextGranuleTokens;
  };
  const uint64_t slots_per_token =
      in.kv_bytes_per_token * static_cast<uint64_t>(in.n_slots) + (host_shares ? in.host_bytes_per_token : 0);
  int64_t fit = fit_tokens(in.available_bytes, slots_per_token);
  std::string what = std::string(in.memory_name) + ": " + Gib(in.available_bytes) + " available, " +
                     std::to_string(in.n_slots) + " slots x " + std::to_string(in.kv_bytes_per_token / 1024) +
                     " KiB/token of KV" +
                     (host_shares && in.host_bytes_per_token > 0
                          ? " + " + std::to_string(in.host_bytes_per_token / 1024) + " KiB/token of host buffers"
                          : "");
  if (!host_shares && in.host_bytes_per_token > 0) {
    const int64_t host_fit = fit_tokens(in.host_available_bytes, in.host_bytes_per_token);
    if (host_fit < fit) {
      fit = host_fit;
      what = "RAM: " + Gib(in.host_available_bytes) + " available, " +
             std::to_string(in.host_bytes_per_token / 1024) + " KiB/token of host buffers";
    }
  }
  if (fit < chosen) {
    out.capped = true;
    chosen = static_cast<int32_t>(std::max<int64_t>(fit, floor_tokens));
    out.at_floor = fit < floor_tokens;
    out.reason = "capped by " + what + ", " + std::to_string(static_cast<int>(kContextHeadroomFraction * 100)) +
                 "% headroom; trained " + std::to_string(trained) +
                 (out.at_floor ? "; below the floor of " + std::to_string(floor_tokens) + ", which is taken anyway"
                               : "");
  }
  out.slot_ctx = chosen;
  return out;
}

uint64_t EstimateKvBytesPerToken(const ModelInfo& info, KvType k, KvType v) {
  if (info.n_layer <= 0 || info.n_head_kv <= 0) return 0;
  const size_t k_width = static_cast<size_t>(info.n_head_kv) * static_cast<size_t>(std::max(info.n_embd_head_k, 0));
  const size_t v_width = static_cast<size_t>(info.n_head_kv) * static_cast<size_t>(std::max(info.n_embd_head_v, 0));
  return static_cast<uint64_t>(info.n_layer) * (KvRowBytes(k, k_width) + KvRowBytes(v, v_width));
}

uint64_t FreeGpuMemoryBytes() {
  uint64_t total_free = 0;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    const auto type = ggml_backend_dev_type(dev);
    if (type != GGML_BACKEND_DEVICE_TYPE_GPU && type != GGML_BACKEND_DEVICE_TYPE_IGPU) continue;
    size_t free_bytes = 0, total_bytes = 0;
    ggml_backend_dev_memory(dev, &free_bytes, &total_bytes);
    total_free += free_bytes;
  }
  return total_free;
}

uint64_t PhysicalRamBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

int ChoosePrefillChunk(int requested, int n_gpu_layers) {
  if (requested > 0) return requested;
  return n_gpu_layers > 0 ? kGpuPrefillChunk : kCpuPrefillChunk;
}

}  // namespace agentkv::engine
