#pragma once
// Fuzzing support for the store's self-checksummed formats: re-sealing a
// mutated file so that its checksum matches again, and seed files.
//
// A fuzzer that flips bytes of a block file or manifest almost never gets past
// the checksum; re-sealing after each mutation lets it reach the structural
// checks behind it (block_file.cc, manifest.cc). Used by the libFuzzer
// targets (AGENTKV_FUZZ=ON) and tested in store_test.
//
// Pure functions on bytes; thread-safe.

#include <cstdint>
#include <string>

namespace agentkv::fuzz {

// Block file (block_file.h): if the 8-byte header length fits the file and the
// header holds `"checksum":"<16 hex digits>"` exactly once, rewrites those
// digits to XXH3-64 of the file with them read as '0's. Returns whether it
// re-sealed; otherwise *bytes is unchanged.
bool ResealBlockFile(std::string* bytes);

// Manifest (manifest.h): if *bytes is a JSON object with a "record", sets
// "checksum" to XXH3-64 of the record's compact dump and, when the record's
// "tokens" is an array of int32 and "fingerprint" a string, recomputes the
// block ids in "blocks" from them (so the content-address check is passed
// too). Re-serializes the document. Returns whether it re-sealed; otherwise
// *bytes is unchanged.
bool ResealManifest(std::string* bytes);

// A valid block file / manifest, varied by `seed` (sizes, index, tensors,
// text with and without UTF-8).
std::string SeedBlockFile(uint32_t seed);
std::string SeedManifest(uint32_t seed);

}  // namespace agentkv::fuzz
