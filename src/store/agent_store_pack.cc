// AgentStore: where blocks lie and how they are read and written: block
// files and pack files (docs/store-format.md, "Pack files"): writing a save's
// new blocks (the full ones as one pack), planning the reads of a load,
// dropping a pack with every block it holds.

#include <algorithm>
#include <thread>

#include "store/agent_store.h"
#include "store/block_file.h"
#include "store/durable_io.h"
#include "store/store_ids.h"

namespace agentkv {
namespace {

// Reads in flight during a load: enough parallel requests to keep a virtual
// or NVMe disk's queue busy (one file per 256-token block, 0.3-10 MB each,
// split into reads of BlockReadChunkBytes so that a few files are enough
// reads too). Measured on the H200 host's disk (16 cores;
// bench/RESULTS.md, issue #8): cold reads of 137 9.4 MB files reach 1.9, 2.0,
// 2.2 GB/s with 8, 16, 32 threads; the threads mostly wait on the disk, so
// twice the cores, at least 8.
int ReadThreads() {
  static const int n = std::clamp(2 * static_cast<int>(std::thread::hardware_concurrency()), 8, 32);
  return n;
}

// Threads that read a pack run's heads and allocate its images' buffers
// (BlockReadOptions::pack_helper_threads): half the cores, 2 to 4. Measured
// with 2048 tokens of an 8B-shape KV (9.4 MB blocks) on a 2-core VM: one
// thread allocated a block in 5.2 ms while the stream copied it in 1.3 ms.
int PackHelperThreads() {
  static const int n = std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 2, 2, 4);
  return n;
}

constexpr std::string_view kPackSuffix = ".pack";

// Block i of `rec` from the provider, checked, with its encoded header
// (block_file.h): what its block file, or its image in a pack, holds.
struct ProvidedBlock {
  KvBlock block;
  EncodedBlockHeader header;
};
Result<ProvidedBlock> ProvideBlock(const AgentRecord& rec, const std::vector<std::string>& ids, uint32_t i,
                                   const BlockProvider& provider) {
  auto block = provider(i, ids[i]);
  if (!block.ok()) return block.status().WithContext("block " + std::to_string(i));
  if (block->index != i || block->n_tokens != BlockTokensAt(rec, i)) {
    return Status::InvalidArgument("block " + std::to_string(i) + ": provider returned index " +
                                   std::to_string(block->index) + ", n_tokens " + std::to_string(block->n_tokens));
  }
  BlockMeta meta{ids[i], i == 0 ? "" : ids[i - 1], rec.fingerprint, rec.kv_types, 0};
  AGENTKV_ASSIGN_OR_RETURN(EncodedBlockHeader header, EncodeBlockHeader(*block, meta));
  return ProvidedBlock{std::move(block).value(), std::move(header)};
}

}  // namespace

BlockReadOptions AgentStore::ReadOptionsFor(const std::vector<BlockSource>& sources) const {
  BlockReadOptions read_options;
  if (!fs_->ConcurrentReads()) return read_options;  // one thread, in order
  const int threads = options_.read_threads > 0 ? options_.read_threads : ReadThreads();
  // Pack runs are read by a thread each (ReadBlockSources); the threads and
  // chunks are planned for the block files.
  uint64_t bytes = 0;
  for (const BlockSource& src : sources) bytes += src.packed ? 0 : src.bytes;
  read_options.chunk_bytes = options_.read_chunk_bytes.value_or(BlockReadChunkBytes(bytes, threads));
  uint64_t reads = 0;
  for (const BlockSource& src : sources) {
    if (!src.packed) reads += 1 + (read_options.chunk_bytes > 0 ? src.bytes / read_options.chunk_bytes : 0);
  }
  // At least two: a pack run's allocations and checksums then run beside its
  // stream.
  read_options.n_threads = static_cast<int>(std::clamp<uint64_t>(reads, 2, std::max(threads, 2)));
  read_options.pack_helper_threads = PackHelperThreads();
  return read_options;
}

std::vector<std::optional<BlockSource>> AgentStore::SourcesLocked(const NamespaceState& ns,
                                                                  std::span<const BlockRef> refs) const {
  std::vector<std::optional<BlockSource>> out(refs.size());
  for (size_t k = 0; k < refs.size(); ++k) {
    auto it = ns.blocks.find(refs[k].id);
    if (it != ns.blocks.end()) out[k] = SourceOf(ns, it->first, it->second);
  }
  return out;
}

std::vector<std::optional<Result<DecodedBlock>>> AgentStore::ReadSources(
    const std::vector<std::optional<BlockSource>>& sources) const {
  std::vector<size_t> held;
  std::vector<BlockSource> present;
  for (size_t k = 0; k < sources.size(); ++k) {
    if (!sources[k]) continue;
    held.push_back(k);
    present.push_back(*sources[k]);
  }
  std::vector<std::optional<Result<DecodedBlock>>> out(sources.size());
  if (present.empty()) return out;
  std::vector<Result<DecodedBlock>> read = ReadBlockSources(fs_, present, ReadOptionsFor(present));
  for (size_t k = 0; k < held.size(); ++k) out[held[k]] = std::move(read[k]);
  return out;
}

std::string AgentStore::PackPath(const NamespaceState& ns, std::string_view pack_id) const {
  return BlocksDir(ns) + "/" + std::string(pack_id) + std::string(kPackSuffix);
}

BlockSource AgentStore::SourceOf(const NamespaceState& ns, const std::string& id, const BlockState& b) const {
  if (b.pack.empty()) return BlockSource::File(BlockPath(ns, id), b.file_bytes);
  return BlockSource::Packed(PackPath(ns, b.pack), b.pack_offset, b.file_bytes);
}

std::string AgentStore::NewPackIdLocked(const NamespaceState& ns, const std::vector<std::string>& block_ids) const {
  for (uint32_t salt = 0;; ++salt) {
    std::string id = PackId(block_ids, salt);
    if (!ns.packs.count(id)) return id;
  }
}

Result<AgentStore::WrittenBlock> AgentStore::WriteBlockFile(const NamespaceState& ns, const AgentRecord& rec,
                                                           const std::vector<std::string>& ids, uint32_t i,
                                                           const BlockProvider& provider) {
  AGENTKV_ASSIGN_OR_RETURN(ProvidedBlock got, ProvideBlock(rec, ids, i, provider));
  AGENTKV_RETURN_IF_ERROR(
      WritePiecesAtomically(fs_, BlockPath(ns, ids[i]), got.header.Pieces(got.block), /*sync_dir=*/false));
  return WrittenBlock{ids[i], got.header.checksum, got.header.file_bytes, "", 0};
}

Result<AgentStore::WrittenPack> AgentStore::WritePackFile(const NamespaceState& ns, const AgentRecord& rec,
                                                          const std::vector<std::string>& ids,
                                                          const std::vector<uint32_t>& indexes,
                                                          const std::string& pack_id, const BlockProvider& provider) {
  AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer,
                           AtomicFileWriter::Open(fs_, PackPath(ns, pack_id)));
  WrittenPack pack;
  pack.id = pack_id;
  // One block in memory at a time: its image is exactly what its own block
  // file would hold, so it verifies on its own.
  for (uint32_t i : indexes) {
    AGENTKV_ASSIGN_OR_RETURN(ProvidedBlock got, ProvideBlock(rec, ids, i, provider));
    const uint64_t offset = writer->bytes_appended();
    for (std::string_view piece : got.header.Pieces(got.block)) AGENTKV_RETURN_IF_ERROR(writer->Append(piece));
    pack.blocks.push_back({ids[i], got.header.checksum, got.header.file_bytes, pack_id, offset});
  }
  pack.file_bytes = writer->bytes_appended();
  AGENTKV_RETURN_IF_ERROR(writer->Commit(/*sync_dir=*/false));
  return pack;
}

Status AgentStore::WriteNewBlocks(const NamespaceState& ns, const AgentRecord& rec,
                                  const std::vector<std::string>& ids, const std::vector<uint32_t>& to_write,
                                  const std::string& pack_id, const BlockProvider& provider,
                                  std::vector<WrittenPack>* packs, std::vector<WrittenBlock>* files) {
  std::vector<uint32_t> packed, single;
  for (uint32_t i : to_write) (BlockTokensAt(rec, i) == kBlockTokens ? packed : single).push_back(i);
  if (pack_id.empty()) {  // too few new full blocks, or packs are off
    single = to_write;
    packed.clear();
  }
  if (!packed.empty()) {
    AGENTKV_ASSIGN_OR_RETURN(WrittenPack pack, WritePackFile(ns, rec, ids, packed, pack_id, provider));
    packs->push_back(std::move(pack));
  }
  for (uint32_t i : single) {
    AGENTKV_ASSIGN_OR_RETURN(WrittenBlock w, WriteBlockFile(ns, rec, ids, i, provider));
    files->push_back(std::move(w));
  }
  return Status::OK();
}

void AgentStore::ForgetPackLocked(NamespaceState* ns, const std::string& pack_id) {
  for (auto it = ns->blocks.begin(); it != ns->blocks.end();) {
    it = it->second.pack == pack_id ? ns->blocks.erase(it) : std::next(it);
  }
  ns->packs.erase(pack_id);
}

void AgentStore::QuarantineBlockLocked(NamespaceState* ns, const std::string& id) {
  auto it = ns->blocks.find(id);
  if (it == ns->blocks.end()) return;
  if (it->second.pack.empty()) {
    QuarantineLocked(ns, BlockPath(*ns, id));
    ns->blocks.erase(it);
    return;
  }
  // One bad image makes the whole pack suspect; its other blocks are
  // rewritten by the next save that names them.
  const std::string pack_id = it->second.pack;
  QuarantineLocked(ns, PackPath(*ns, pack_id));
  ForgetPackLocked(ns, pack_id);
}

}  // namespace agentkv
