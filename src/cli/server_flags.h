#pragma once
// The flags `serve`, `demo` and `run` share, parsed into a ServerConfig.

#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/server_stack.h"

namespace agentkv::cli {

inline constexpr const char* kServeUsage =
    "usage: agentkv serve -m MODEL [--host 127.0.0.1] [--port 8080] [-c CTX] [--slots N]\n"
    "                     [--kv q4_0|q8_0|f16] [--slot-kv auto|f16|q8_0|q4_0] [--cache-dir DIR] [--cache-ram BYTES] [--cache-disk BYTES]\n"
    "                     [--cache-disk-per-tenant BYTES]   (each API key's share of the disk; its own LRU agents go first)\n"
    "                     [--agent-table-ram BYTES]\n"
    "                     [--api-key KEY[,KEY...]|--api-key-file F] [--admin-key KEY] [-t THREADS]\n"
    "                     [--prefill-chunk N] [--tenant-requests N] [--alias NAME]... [--strict-model-name]\n"
    "                     [--no-warmup]   (skip the throw-away decode at start that loads GPU kernels)\n"
    "                     [--gpu-layers N]   (-1 = all on the GPU when built with CUDA and a GPU is present)\n"
    "                     [--remote redis://[user:pass@]host:port[/db]] [--remote-password-file F]\n"
    "                     [--chat-template-file F.jinja] [--reasoning-format auto|none|deepseek]\n"
    "                     [--read-landing auto|on|off] [--read-reserve auto|on|off]\n"
    "                     [--pipelined-restore auto|on|off] [--staging-reserve auto|start|beside|background]\n"
    "                     [--landing-reserve auto|start|beside|background]\n"
    "                     [--read-threads N] [--read-chunk-kib N]\n"
    "--kv: the KV type at rest (RAM pool, disk, remote; default q4_0). --slot-kv: the type in the engine's\n"
    "slots; auto (default) = --kv's type, CPU and GPU (f16: the hybrid, restores convert).\n"
    "--prefill-chunk: prompt tokens a step feeds (0, the default: 2048 with layers on a GPU, 512 on the CPU).\n"
    "Every flag is also read from AGENTKV_<FLAG> (e.g. AGENTKV_PORT, AGENTKV_CACHE_RAM).\n"
    "API keys: KEY, NAME:KEY or NAME:KEY:isolated (repeatable); keys of one NAME share a namespace. An\n"
    "isolated key is a namespace of its own: no other key matches, continues, forks or lists its agents.\n"
    "WITHOUT --api-key ALL CLIENTS SHARE ONE NAMESPACE (they can read and continue each other's agents). --admin-key guards /metrics\n"
    "(with --api-key and no --admin-key, /metrics is off). --tenant-requests: generation requests one\n"
    "key may have in flight (0 = no cap; default half the queue with 2+ keys, else none).\n"
    "--remote: agents' caches are shared with every server on that Redis (docs/remote.md); the\n"
    "password may come from --remote-password-file or AGENTKV_REMOTE_PASSWORD instead of the URL.\n"
    "Any \"model\" name is accepted (one model is served) unless --strict-model-name; --alias NAME\n"
    "(repeatable, or comma-separated) adds names that /v1/models lists.\n"
    "--chat-template-file: a Jinja chat template used instead of the model's. --reasoning-format: a\n"
    "reasoning model's thinking comes back apart (auto, deepseek: message.reasoning_content) or stays\n"
    "in the content (none); default auto, as llama-server; requests may set reasoning_format.\n"
    "--read-landing: a disk read writes the restore's state while it reads (a second slot-sized state\n"
    "buffer); auto = on with a GPU, where it takes the host copy off the returning agent's TTFT.\n"
    "--read-reserve: one slot's worth of block memory faulted in at start and reused by disk reads, so\n"
    "that a read does not fault on every page (memory held while idle); auto = on.\n"
    "--pipelined-restore: a returning agent's restore and first decode run while its blocks are still\n"
    "read, each layer as soon as its rows are in (used only if the read then verifies); auto = on with\n"
    "a GPU (where it puts the restore under the read), off on CPU.\n"
    "--staging-reserve: the staging buffer (one slot's state, page-locked on a GPU) is reserved on the\n"
    "start-up's path (start; auto = start), on a thread of its own beside the rest of the start-up, the\n"
    "server serving once it is ready (beside), or in the background, the first restore waiting for it.\n"
    "--landing-reserve: the same for the read landing (auto = start); until it is ready, disk reads\n"
    "restore without it.\n"
    "--read-threads / --read-chunk-kib: a disk load's reads in flight (default twice the cores, 8 to 32)\n"
    "and the size of each (default about two per thread, at least 1 MiB; 0 = one read per block file).\n"
    "BYTES: 512M, 4G, ...\n"
    "--agent-table-ram: bound of the agents' metadata and texts kept in RAM (default 256M); past it\n"
    "agents cached only on disk are dropped from it and read back from their manifest when they return.\n"
    "Defaults: cache dir $AGENTKV_CACHE_DIR or ~/.cache/agentkv/kv; cache RAM 25% of memory;\n"
    "context (-c, or -c 0) = the model's trained context per slot (as llama-server's -c 0), capped by\n"
    "what the slots' KV takes of the memory it lives in (GPU: free memory after the weights; CPU: RAM\n"
    "less the weights and --cache-ram, 10% headroom), in multiples of 256, at least 2048; the start\n"
    "log says which and why. 4 slots.\n";

// The flags of ParseServerConfig that take no value: pass them (plus the
// command's own) to Flags, so that "--no-warmup --port 80" keeps its port.
inline const std::vector<std::string> kServerBooleanFlags = {"help", "strict-model-name", "no-warmup"};

// Fills *config from flags (model required unless require_model is false).
// Returns false with *error set on a bad value or unknown flag.
bool ParseServerConfig(const Flags& flags, ServerConfig* config, std::string* error, bool require_model = true,
                       const std::vector<std::string>& extra_known = {});

}  // namespace agentkv::cli
