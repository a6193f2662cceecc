#pragma once
// Test helper: edit a block file and re-seal its checksum, so that the
// decoder gets past the checksum and reaches the structural checks behind it
// (a plain edit only ever reaches "checksum mismatch").
//
// The checksum is XXH3-64 over the whole file with its own 16 hex digits
// read as '0's (block_file.h); re-sealing recomputes the length prefix, pads
// the JSON header with spaces to a multiple of 8 and writes the new checksum.

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "store/block_file.h"
#include "util/hash.h"

namespace agentkv::store_test {

// `header_text` (any bytes; need not be JSON) and `data` sealed into a block
// file: the metadata's checksum digits must appear in `header_text` as
// "checksum":"0000000000000000" exactly once.
inline std::string SealBlockFile(std::string header_text, std::string_view data) {
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((uint64_t{header_text.size()} >> (8 * i)) & 0xff);
  file += header_text;
  file += data;
  const std::string zeros = "\"checksum\":\"0000000000000000\"";
  const size_t at = file.find(zeros);
  if (at != std::string::npos) file.replace(at + 12, 16, Hex64(Xxh3_64(file)));
  return file;
}

// Decodes the envelope of a valid block file (REQUIRES: one), lets the
// callers edit its header JSON and data section, and re-seals it.
inline std::string ResealBlockFile(std::string_view file, const std::function<void(nlohmann::json&)>& edit_header,
                                   const std::function<void(std::string&)>& edit_data = nullptr) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<uint8_t>(file[i])} << (8 * i);
  nlohmann::json header = nlohmann::json::parse(file.substr(8, n));
  std::string data(file.substr(8 + n));
  if (edit_header) edit_header(header);
  if (edit_data) edit_data(data);
  header["__metadata__"]["checksum"] = "0000000000000000";
  return SealBlockFile(header.dump(), data);
}

}  // namespace agentkv::store_test
