#include "cli/server_flags.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "api/openai_reasoning.h"
#include "cli/key_flags.h"

namespace agentkv::cli {

bool ParseServerConfig(const Flags& flags, ServerConfig* config, std::string* error, bool require_model,
                       const std::vector<std::string>& extra_known) {
  std::vector<std::string> known = {"m", "model", "host", "port", "c", "ctx", "slots", "kv", "slot-kv", "cache-dir",
                                    "cache-ram", "cache-disk", "cache-disk-per-tenant", "agent-table-ram", "api-key", "api-key-file", "admin-key", "tenant-requests", "t", "threads",
                                    "prefill-chunk", "gpu-layers", "ngl", "remote", "remote-password-file", "help", "alias", "strict-model-name",
                                    "no-warmup", "chat-template-file", "reasoning-format", "read-landing", "read-reserve", "pipelined-restore", "staging-reserve", "landing-reserve", "read-threads", "read-chunk-kib"};
  known.insert(known.end(), extra_known.begin(), extra_known.end());
  if (!flags.error().empty()) {
    *error = flags.error();
    return false;
  }
  if (auto unknown = flags.Unknown(known); !unknown.empty()) {
    *error = "unknown flag --" + unknown[0];
    return false;
  }
  if (auto m = flags.Get("model", "m")) config->model_path = *m;
  if (require_model && config->model_path.empty()) {
    *error = "-m MODEL is required";
    return false;
  }
  long long port, ctx, slots, threads, chunk, ngl;
  if (!flags.GetInt("port", "", config->port, &port, error) || !flags.GetInt("ctx", "c", 0, &ctx, error) ||
      !flags.GetInt("slots", "", config->n_slots, &slots, error) ||
      !flags.GetInt("threads", "t", 0, &threads, error) ||
      !flags.GetInt("prefill-chunk", "", config->prefill_chunk, &chunk, error) ||
      !flags.GetInt("gpu-layers", "ngl", -1, &ngl, error)) {
    return false;
  }
  if (port < 0 || port > 65535 || ctx < 0 || slots < 1 || slots > 256 || threads < 0 || chunk < 0 || chunk > 8192) {
    *error = "a numeric flag is out of range";
    return false;
  }
  config->port = static_cast<int>(port);
  config->slot_ctx = static_cast<int>(ctx);
  config->n_slots = static_cast<int>(slots);
  config->n_threads = static_cast<int>(threads);
  config->prefill_chunk = static_cast<int>(chunk);
  config->n_gpu_layers = static_cast<int>(std::max(-1LL, ngl));
  config->host = flags.GetOr("host", "", config->host);
  auto kv = engine::ParseKvType(flags.GetOr("kv", "", "q4_0"));
  if (!kv.ok()) {
    *error = kv.status().message();
    return false;
  }
  config->kv_type = *kv;
  auto slot_kv = engine::ParseSlotKvType(flags.GetOr("slot-kv", "", "auto"));
  if (!slot_kv.ok()) {
    *error = slot_kv.status().message();
    return false;
  }
  config->slot_kv_type = *slot_kv;
  config->cache_dir = flags.GetOr("cache-dir", "", config->cache_dir);
  for (const auto& [name, field] : {std::pair{"cache-ram", &config->cache_ram_bytes},
                                    std::pair{"cache-disk", &config->cache_disk_bytes},
                                    std::pair{"cache-disk-per-tenant", &config->cache_disk_per_tenant_bytes},
                                    std::pair{"agent-table-ram", &config->agent_table_bytes}}) {
    if (auto v = flags.Get(name)) {
      auto b = ParseBytes(*v);
      if (!b.ok()) {
        *error = std::string("--") + name + ": " + b.status().message();
        return false;
      }
      *field = *b;
    }
  }
  if (!ParseKeyFlags(flags, &config->api_keys, &config->admin_key, error)) return false;
  for (const std::string& value : flags.GetAll("alias")) {
    for (const std::string& alias : SplitCommaList(value)) {
      if (alias.empty() || alias.size() > 256) {
        *error = "--alias: names must be 1-256 characters (comma-separated)";
        return false;
      }
      config->model_aliases.push_back(alias);
    }
  }
  if (auto s = flags.Get("strict-model-name")) config->strict_model_name = *s != "0" && *s != "false";
  if (auto s = flags.Get("no-warmup")) config->warmup = *s == "0" || *s == "false";
  if (auto f = flags.Get("chat-template-file"); f && !f->empty()) {
    std::ifstream in(*f, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in || text.str().empty()) {
      *error = "--chat-template-file: cannot read " + *f + " (or it is empty)";
      return false;
    }
    config->chat_template = text.str();
  }
  if (auto r = flags.Get("reasoning-format")) {
    auto format = api::ReasoningFormatFromName(*r);
    if (!format) {
      *error = "--reasoning-format: expected auto, none or deepseek";
      return false;
    }
    config->reasoning_format = *format;
  }
  if (auto r = flags.Get("read-landing"); r && *r != "auto") {
    if (*r != "on" && *r != "off") {
      *error = "--read-landing: expected auto, on or off";
      return false;
    }
    config->read_landing = *r == "on";
  }
  if (auto r = flags.Get("pipelined-restore"); r && *r != "auto") {
    if (*r != "on" && *r != "off") {
      *error = "--pipelined-restore: expected auto, on or off";
      return false;
    }
    config->pipelined_restore = *r == "on";
  }
  using When = engine::StagingBuffer::When;
  for (auto [flag, when] : {std::pair{"staging-reserve", &config->staging_reserve},
                            std::pair{"landing-reserve", &config->landing_reserve}}) {
    if (auto r = flags.Get(flag); r && *r != "auto") {
      if (*r != "start" && *r != "beside" && *r != "background") {
        *error = std::string("--") + flag + ": expected auto, start, beside or background";
        return false;
      }
      *when = *r == "start" ? When::kNow : *r == "beside" ? When::kBeside : When::kBackground;
    }
  }
  if (auto r = flags.Get("read-reserve"); r && *r != "auto") {
    if (*r != "on" && *r != "off") {
      *error = "--read-reserve: expected auto, on or off";
      return false;
    }
    config->read_reserve = *r == "on";
  }
  long long read_threads = 0, read_chunk_kib = 0;
  if (!flags.GetInt("read-threads", "", 0, &read_threads, error)) return false;
  if (read_threads < 0 || read_threads > 256) {
    *error = "--read-threads: expected 0 (the default) to 256";
    return false;
  }
  config->read_threads = static_cast<int>(read_threads);
  if (flags.Get("read-chunk-kib")) {
    if (!flags.GetInt("read-chunk-kib", "", 0, &read_chunk_kib, error)) return false;
    if (read_chunk_kib < 0 || read_chunk_kib > (1 << 20)) {
      *error = "--read-chunk-kib: expected 0 (a read per file) to 1048576";
      return false;
    }
    config->read_chunk_bytes = static_cast<size_t>(read_chunk_kib) << 10;
  }
  long long tenant_requests;
  if (!flags.GetInt("tenant-requests", "", -1, &tenant_requests, error)) return false;
  if (tenant_requests < -1 || tenant_requests > 1000000) {
    *error = "--tenant-requests is out of range";
    return false;
  }
  config->tenant_requests = static_cast<int>(tenant_requests);
  if (auto r = flags.Get("remote"); r && !r->empty()) {
    if (auto o = ParseRedisUrl(*r); !o.ok()) {
      *error = "--remote: " + o.status().message();
      return false;
    }
    config->remote_url = *r;
  }
  config->remote_password_file = flags.GetOr("remote-password-file", "", "");
  return true;
}

}  // namespace agentkv::cli
