#include "bench/store_bench.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "bench/raw_io.h"
#include "bench/stats.h"
#include "engine/seq_state.h"
#include "store/agent_store.h"
#include "store/store_ids.h"
#include "util/warm_memory.h"

namespace agentkv::bench {
namespace {

namespace fs = std::filesystem;

// A record for n tokens: 4 text bytes per token (about English's average),
// so the manifest has a realistic size.
AgentRecord MakeRecord(const std::vector<int32_t>& tokens) {
  AgentRecord r;
  r.tokens = tokens;
  r.text.reserve(tokens.size() * 4);
  for (size_t i = 0; i < tokens.size(); ++i) {
    r.text += "tok ";
    r.spans.push_back({static_cast<uint32_t>(4 * i), static_cast<uint32_t>(4 * i + 4)});
  }
  r.layout_version = engine::kEngineLayoutVersion;
  return r;
}

void Log(const StoreBenchOptions& o, const std::string& line) {
  if (o.log) o.log(line);
}

// Regular files under `dir` (recursively), sorted.
std::vector<std::string> FilesUnder(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file()) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Drops `paths` from the page cache and returns the byte-weighted fraction of
// their pages still resident afterwards. Advice failures are recorded in
// `result`, not returned: the benchmark still runs, labelled.
Result<double> DropAll(const std::vector<std::string>& paths, StoreBenchResult* result) {
  double resident = 0;
  double total = 0;
  for (const auto& p : paths) {
    if (Status s = DropFromPageCache(p); !s.ok() && result->drop_accepted) {
      result->drop_accepted = false;
      result->drop_error = s.ToString();
    }
    AGENTKV_ASSIGN_OR_RETURN(double frac, ResidentFraction(p));
    const double bytes = static_cast<double>(fs::file_size(p));
    resident += frac * bytes;
    total += bytes;
  }
  return total > 0 ? resident / total : 0.0;
}

Status DeleteAllAgents(AgentStore& store, const std::string& ns) {
  AGENTKV_ASSIGN_OR_RETURN(auto agents, store.ListAgents(ns));
  for (const auto& a : agents) AGENTKV_RETURN_IF_ERROR(store.DeleteAgent(ns, a.agent_id));
  return Status::OK();
}

}  // namespace

Result<StoreBenchInput> InputFromModel(engine::Context& ctx, int n_tokens, uint64_t seed) {
  assert(n_tokens >= 1 && n_tokens <= ctx.options().slot_ctx);
  std::mt19937_64 rng(seed);
  // Ids >= 3 skip the usual control tokens (UNK, BOS, EOS).
  std::uniform_int_distribution<int32_t> dist(3, std::max(3, ctx.n_vocab() - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
  for (auto& t : tokens) t = dist(rng);
  ctx.ClearSlot(0);
  const size_t n_batch = static_cast<size_t>(ctx.options().n_batch);
  std::vector<engine::BatchItem> items;
  for (size_t i = 0; i < tokens.size(); i += n_batch) {
    items.clear();
    for (size_t j = i; j < std::min(tokens.size(), i + n_batch); ++j) {
      items.push_back({0, tokens[j], static_cast<int32_t>(j), false});
    }
    if (Status s = ctx.Decode(items); !s.ok()) {
      ctx.ClearSlot(0);
      return s.WithContext("bench store: prefill");
    }
  }
  auto blocks = ctx.ExportSlotBlocks(0);
  ctx.ClearSlot(0);
  if (!blocks.ok()) return blocks.status().WithContext("bench store: export");
  StoreBenchInput in;
  in.record = MakeRecord(tokens);
  in.record.kv_types = ctx.spec().KvTypesString();
  in.blocks = std::move(blocks).value();
  in.fingerprint = ctx.spec().fingerprint;
  in.kv_types = ctx.spec().KvTypesString();
  in.source = "prefill of " + std::to_string(n_tokens) + " random tokens on " + ctx.model().info().name + " (" +
              in.kv_types + ")";
  return in;
}

StoreBenchInput SyntheticInput(int n_tokens, uint64_t seed, uint32_t n_layers, uint32_t row_bytes) {
  assert(n_layers >= 1 && row_bytes >= 1);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens));
  for (auto& t : tokens) t = static_cast<int32_t>(3 + rng() % 31997);
  StoreBenchInput in;
  in.record = MakeRecord(tokens);
  in.kv_types = "k=q4_0,v=q4_0";
  in.record.kv_types = in.kv_types;
  in.fingerprint = "agentkv-bench-synthetic";
  in.source = "synthetic: " + std::to_string(n_tokens) + " tokens, " + std::to_string(n_layers) +
              " layers x K,V rows of " + std::to_string(row_bytes) + " bytes (random)";
  for (uint32_t b = 0; b * kBlockTokens < static_cast<uint32_t>(n_tokens); ++b) {
    KvBlock block;
    block.index = b;
    block.n_tokens = std::min<uint32_t>(kBlockTokens, static_cast<uint32_t>(n_tokens) - b * kBlockTokens);
    for (uint32_t l = 0; l < n_layers; ++l) {
      for (const char* kv : {"k", "v"}) {
        KvTensor t;
        t.name = "c0.l" + std::to_string(l) + "." + kv;
        t.row_bytes = row_bytes;
        t.first_pos = block.first_pos();
        t.n_rows = block.n_tokens;
        t.data.resize(static_cast<size_t>(t.n_rows) * row_bytes);
        for (size_t i = 0; i < t.data.size(); i += 8) {
          const uint64_t r = rng();
          std::memcpy(t.data.data() + i, &r, std::min<size_t>(8, t.data.size() - i));
        }
        block.tensors.push_back(std::move(t));
      }
    }
    in.blocks.push_back(std::move(block));
  }
  return in;
}

Result<StoreBenchResult> RunStoreBench(const StoreBenchInput& input, const StoreBenchOptions& o) {
  assert(!o.cache_dir.empty() && o.reps >= 1);
  AgentStoreOptions so;
  so.cache_dir = o.cache_dir;
  so.fingerprint = input.fingerprint;
  so.kv_types = input.kv_types;
  if (o.read_threads) so.read_threads = *o.read_threads;
  if (o.read_chunk_bytes) so.read_chunk_bytes = *o.read_chunk_bytes;
  AGENTKV_ASSIGN_OR_RETURN(auto store, AgentStore::Open(so));
  AGENTKV_RETURN_IF_ERROR(DeleteAllAgents(*store, o.ns));
  const std::string ns_dir = store->root_dir() + "/" + NameHash(o.ns);
  const std::string plain_path = o.cache_dir + "/agentkv-bench-plain.bin";

  StoreBenchResult result;
  result.n_tokens = static_cast<uint32_t>(input.record.tokens.size());
  result.n_blocks = static_cast<uint32_t>(input.blocks.size());
  for (const auto& b : input.blocks) result.payload_bytes += b.payload_bytes();
  auto provider = [&input](uint32_t index, const std::string&) -> Result<KvBlock> {
    if (index >= input.blocks.size()) return Status::Internal("bench store: no block " + std::to_string(index));
    return input.blocks[index];
  };

  // The reserve a server would hold for this agent: its blocks' tensor sizes.
  std::map<size_t, size_t> reserve;
  if (o.read_reserve) {
    for (const auto& b : input.blocks) {
      for (const auto& t : b.tensors) ++reserve[t.data.size()];
    }
  }
  store->read_reserve().SetTargets({reserve.begin(), reserve.end()});

  std::vector<uint8_t> plain_bytes;
  for (int rep = 0; rep < o.reps; ++rep) {
    StoreBenchRep r;
    AgentRecord record = input.record;
    record.agent_id = "bench-" + std::to_string(rep);
    if (rep > 0) AGENTKV_RETURN_IF_ERROR(store->DeleteAgent(o.ns, "bench-" + std::to_string(rep - 1)));

    auto t0 = std::chrono::steady_clock::now();
    AGENTKV_ASSIGN_OR_RETURN(SaveResult saved, store->SaveAgent(o.ns, record, provider));
    r.save_ms = MsSince(t0);
    if (saved.blocks_written != result.n_blocks) {
      return Status::Internal("bench store: save wrote " + std::to_string(saved.blocks_written) + " of " +
                              std::to_string(result.n_blocks) + " blocks");
    }

    const auto files = FilesUnder(ns_dir);
    std::vector<std::string> block_files;
    uint64_t block_file_bytes = 0;
    for (const auto& f : files) {
      if (f.ends_with(".safetensors")) {
        block_files.push_back(f);
        block_file_bytes += fs::file_size(f);
      } else if (f.ends_with(".json")) {
        result.manifest_bytes = fs::file_size(f);
      }
    }
    result.block_file_bytes = block_file_bytes;
    if (plain_bytes.empty()) {
      // The same bytes as the block files, so a file system that compresses
      // or deduplicates treats both alike.
      for (const auto& f : block_files) {
        AGENTKV_ASSIGN_OR_RETURN(std::string data, DefaultFileSystem()->ReadFile(f));
        plain_bytes.insert(plain_bytes.end(), data.begin(), data.end());
      }
    }

    if (o.read_reserve) store->read_reserve().FillShare(0, 1);  // what the last repetition's loads took
    AGENTKV_ASSIGN_OR_RETURN(r.store_resident_after_drop, DropAll(files, &result));
    t0 = std::chrono::steady_clock::now();
    AGENTKV_ASSIGN_OR_RETURN(LoadedAgent cold, store->LoadBlocks(o.ns, record.agent_id));
    r.load_cold_ms = MsSince(t0);
    if (!cold.complete || cold.blocks.size() != result.n_blocks) {
      return Status::Internal("bench store: load incomplete: " + cold.stop_reason.ToString());
    }
    t0 = std::chrono::steady_clock::now();
    AGENTKV_ASSIGN_OR_RETURN(LoadedAgent warm, store->LoadBlocks(o.ns, record.agent_id));
    r.load_warm_ms = MsSince(t0);

    t0 = std::chrono::steady_clock::now();
    AGENTKV_RETURN_IF_ERROR(WriteFileSynced(plain_path, plain_bytes));
    r.plain_write_ms = MsSince(t0);
    AGENTKV_ASSIGN_OR_RETURN(r.plain_resident_after_drop, DropAll({plain_path}, &result));
    t0 = std::chrono::steady_clock::now();
    AGENTKV_ASSIGN_OR_RETURN(uint64_t n_read, ReadFileSequential(plain_path));
    r.plain_read_ms = MsSince(t0);
    if (n_read != plain_bytes.size()) return Status::IOError("bench store: short read of " + plain_path);

    AGENTKV_ASSIGN_OR_RETURN(double ignored, DropAll(block_files, &result));
    (void)ignored;
    t0 = std::chrono::steady_clock::now();
    for (const auto& f : block_files) AGENTKV_RETURN_IF_ERROR(ReadFileSequential(f).status());
    r.plain_read_blocks_ms = MsSince(t0);

    Log(o, Format("rep %d: save %.1f ms, load cold %.1f ms (resident %.0f%%), warm %.1f ms, plain write %.1f ms, "
                  "plain read %.1f ms, plain read of block files %.1f ms",
                  rep + 1, r.save_ms, r.load_cold_ms, 100 * r.store_resident_after_drop, r.load_warm_ms,
                  r.plain_write_ms, r.plain_read_ms, r.plain_read_blocks_ms));
    result.reps.push_back(r);
  }
  AGENTKV_RETURN_IF_ERROR(DeleteAllAgents(*store, o.ns));
  std::error_code ec;
  fs::remove(plain_path, ec);
  return result;
}

}  // namespace agentkv::bench
