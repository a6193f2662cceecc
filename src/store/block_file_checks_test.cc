// Every structural check of DecodeBlockFile that runs after the checksum is
// reached: each case edits a valid block file, re-seals its checksum
// (block_file_test_util.h) and expects that check's own message.

#include <gtest/gtest.h>

#include "store/block_file.h"
#include "store/block_file_test_util.h"
#include "store/store_ids.h"
#include "store/store_test_util.h"

namespace agentkv {
namespace {

using namespace store_test;  // NOLINT
using nlohmann::json;

// Block 1 of a 300-token agent: 44 tokens; tensors c0.l0.k (44 rows x 18
// bytes), c0.l0.v (44 x 10), c0.l1.k (3 x 18), c0.l1.v (3 x 10).
std::string ValidFile() {
  const auto tokens = MakeTokens(300, 4);
  const auto ids = ComputeBlockIds(kFp, tokens);
  auto file = EncodeBlockFile(MakeBlock(tokens, 1), BlockMeta{ids[1], ids[0], kFp, kKvTypes, 0});
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? *file : "";
}

// The tensor list (a JSON array held as a string in the metadata).
json Order(const json& h) { return json::parse(h["__metadata__"]["tensors"].get<std::string>()); }
void SetOrder(json& h, const json& order) { h["__metadata__"]["tensors"] = order.dump(); }

TEST(BlockFileChecksTest, ResealingAnUneditedFileGivesTheSameBytes) {
  const std::string file = ValidFile();
  EXPECT_EQ(ResealBlockFile(file, nullptr), file);
  EXPECT_TRUE(DecodeBlockFile(ResealBlockFile(file, nullptr)).ok());
  // And a re-sealed edit that keeps the file valid decodes to the edit.
  auto dec = DecodeBlockFile(ResealBlockFile(file, [](json& h) { h["__metadata__"]["kv_types"] = "k:f16,v:f16"; }));
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(dec->meta.kv_types, "k:f16,v:f16");
}

struct Case {
  const char* name;
  std::function<void(json&)> edit_header;
  std::function<void(std::string&)> edit_data;
  const char* message;  // DecodeBlockFile's, after "block file: "
};

TEST(BlockFileChecksTest, EveryStructuralCheckIsReached) {
  const std::string file = ValidFile();
  const std::vector<Case> cases = {
      {"index with a leading zero", [](json& h) { h["__metadata__"]["index"] = "01"; }, nullptr, "bad index"},
      {"index too large", [](json& h) { h["__metadata__"]["index"] = "99999999"; }, nullptr, "bad index"},
      {"n_tokens 0", [](json& h) { h["__metadata__"]["n_tokens"] = "0"; }, nullptr, "bad n_tokens"},
      {"n_tokens 257", [](json& h) { h["__metadata__"]["n_tokens"] = "257"; }, nullptr, "bad n_tokens"},
      {"block id", [](json& h) { h["__metadata__"]["block_id"] = "not-hex"; }, nullptr, "bad block id"},
      {"no parent for index 1", [](json& h) { h["__metadata__"]["parent_id"] = ""; }, nullptr, "bad parent id"},
      {"empty kv types", [](json& h) { h["__metadata__"]["kv_types"] = ""; }, nullptr,
       "empty fingerprint or kv types"},
      {"tensor list not an array", [](json& h) { h["__metadata__"]["tensors"] = "{}"; }, nullptr,
       "tensor list is not a JSON array"},
      {"tensor list one short",
       [](json& h) {
         json o = Order(h);
         o.erase(o.size() - 1);
         SetOrder(h, o);
       },
       nullptr, "tensor list does not match the header"},
      {"tensor list entry not an object",
       [](json& h) {
         json o = Order(h);
         o[0] = 5;
         SetOrder(h, o);
       },
       nullptr, "tensor list entry is not an object"},
      {"first_pos not a number",
       [](json& h) {
         json o = Order(h);
         o[0]["first_pos"] = "256";
         SetOrder(h, o);
       },
       nullptr, "tensor list entry malformed"},
      {"listed tensor absent",
       [](json& h) {
         json o = Order(h);
         o[0]["name"] = "c9.l9.k";
         SetOrder(h, o);
       },
       nullptr, "tensor c9.l9.k missing"},
      {"dtype", [](json& h) { h["c0.l0.k"]["dtype"] = "F16"; }, nullptr, "tensor c0.l0.k: dtype is not U8"},
      {"shape of one dimension", [](json& h) { h["c0.l0.k"]["shape"] = {44}; }, nullptr, "tensor c0.l0.k: bad shape"},
      {"offsets not numbers", [](json& h) { h["c0.l0.k"]["data_offsets"] = {"0", "792"}; }, nullptr,
       "tensor c0.l0.k: bad data_offsets"},
      {"rows beyond 32 bits", [](json& h) { h["c0.l0.k"]["shape"] = {uint64_t{1} << 32, 0}; }, nullptr,
       "tensor c0.l0.k: too large"},
      {"offsets past the data",
       [](json& h) { h["c0.l1.v"]["data_offsets"][1] = h["c0.l1.v"]["data_offsets"][1].get<uint64_t>() + 1; },
       nullptr, "tensor c0.l1.v: offsets out of range"},
      {"shape against offsets", [](json& h) { h["c0.l0.k"]["shape"] = {43, 18}; }, nullptr,
       "tensor c0.l0.k: shape does not match offsets"},
      {"rows before the block",
       [](json& h) {
         json o = Order(h);
         o[0]["first_pos"] = 0;
         SetOrder(h, o);
       },
       nullptr, "tensor c0.l0.k: rows outside the block"},
      {"tensor listed twice",
       [](json& h) {
         json o = Order(h);
         o[1] = o[0];  // c0.l0.v unlisted, c0.l0.k twice: the counts still agree
         SetOrder(h, o);
       },
       nullptr, "duplicate tensor c0.l0.k"},
      {"overlapping tensors",
       [](json& h) {
         for (auto& x : h["c0.l0.v"]["data_offsets"]) x = x.get<uint64_t>() - 1;
       },
       nullptr, "tensor data overlaps or leaves a hole"},
      {"trailing data", nullptr, [](std::string& d) { d += "x"; }, "data section has trailing bytes"},
  };
  for (const Case& c : cases) {
    auto dec = DecodeBlockFile(ResealBlockFile(file, c.edit_header, c.edit_data));
    ASSERT_FALSE(dec.ok()) << c.name;
    EXPECT_EQ(dec.status().code(), StatusCode::kCorruption) << c.name;
    EXPECT_EQ(dec.status().message(), std::string("block file: ") + c.message) << c.name;
  }
}

}  // namespace
}  // namespace agentkv
