// AgentStore: pack files (docs/store-format.md, "Pack files"): writing a
// save's new full blocks as one pack, where a block lies, and dropping a
// pack with every block it holds.

#include "store/agent_store.h"
#include "store/block_file.h"
#include "store/durable_io.h"
#include "store/store_ids.h"

namespace agentkv {
namespace {

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
