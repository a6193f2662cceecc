#include "store/block_read.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

namespace agentkv {

Result<DecodedBlock> ReadBlockFile(FileSystem* fs, const std::string& path) {
  AGENTKV_ASSIGN_OR_RETURN(const uint64_t file_size, fs->FileSize(path));
  AGENTKV_ASSIGN_OR_RETURN(std::string head,
                           fs->ReadRange(path, 0, static_cast<size_t>(std::min<uint64_t>(file_size, kBlockHeadReadBytes))));
  AGENTKV_ASSIGN_OR_RETURN(const uint64_t data_offset, BlockDataOffset(head, file_size));
  if (head.size() < data_offset) {  // a header longer than the first read
    AGENTKV_ASSIGN_OR_RETURN(std::string rest, fs->ReadRange(path, head.size(), data_offset - head.size()));
    head += rest;
    if (head.size() < data_offset) return Status::Corruption("block file: " + path + " shrank while read");
  }
  AGENTKV_ASSIGN_OR_RETURN(BlockFileLayout layout,
                           DecodeBlockHeader(std::string_view(head).substr(0, data_offset), file_size));

  // The data bytes the head read already holds go into the first pieces; the
  // rest is read in place.
  std::vector<std::span<uint8_t>> pieces = layout.DataPieces();
  std::string_view have = std::string_view(head).substr(data_offset);
  size_t k = 0;
  while (k < pieces.size() && !have.empty()) {
    const size_t n = std::min(pieces[k].size(), have.size());
    std::memcpy(pieces[k].data(), have.data(), n);
    have.remove_prefix(n);
    pieces[k] = pieces[k].subspan(n);
    if (pieces[k].empty()) ++k;
  }
  const uint64_t offset = static_cast<uint64_t>(head.size());
  std::span<const std::span<uint8_t>> rest(pieces.data() + k, pieces.size() - k);
  size_t want = 0;
  for (auto p : rest) want += p.size();
  if (want > 0) {
    AGENTKV_ASSIGN_OR_RETURN(const size_t got, fs->ReadScattered(path, offset, rest));
    if (got != want) return Status::Corruption("block file: " + path + " shrank while read");
  }
  return FinishBlockFile(std::move(layout));
}

}  // namespace agentkv
