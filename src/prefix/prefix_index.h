#pragma once
// PrefixIndex: the implicit-identity lookup of one namespace
// (FindLongestPrefixAgent) without a scan of every agent's text.
//
// Holds (id, text) pairs sorted by text. The text sharing the longest prefix
// with a prompt P is a neighbour of P's position in that order, and every
// text that shares that many bytes lies in one contiguous run after
// lower_bound(P[0:L]); so a lookup costs O(log n) comparisons of at most
// len(P) bytes, plus the run of texts tied at the longest prefix (capped by
// `max_tie_scan`).
//
// Result: the same agent FindLongestPrefixAgent picks when its input is the
// same texts in increasing id order (largest L; ties: shortest text, then
// lowest id), except when more than `max_tie_scan` texts tie at L and none
// of them equals P[0:L]: then the pick is the best of the first
// `max_tie_scan` of the run in text order. A text equal to P[0:L] (the
// EXACT/EXTEND case) is always first in the run, so it is never missed.
// (Exact for valid UTF-8; CommonPrefixBytes rounds to code points.)
//
// Texts are copied (the caller's strings may change or move). Empty texts
// are not indexed. Thread safety: none; one owner thread.

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace agentkv {

class PrefixIndex {
 public:
  static constexpr size_t kDefaultMaxTieScan = 1024;
  explicit PrefixIndex(size_t max_tie_scan = kDefaultMaxTieScan) : max_tie_scan_(max_tie_scan) {}

  // Inserts or replaces the text of `id`; an empty text removes it.
  void Set(const std::string& id, std::string_view text);
  void Remove(const std::string& id);

  struct Hit {
    std::string id;
    size_t common_bytes = 0;  // L > 0
  };
  // nullopt when no text shares a code point with `prompt`.
  std::optional<Hit> FindLongestPrefix(std::string_view prompt) const;

  size_t size() const { return by_id_.size(); }
  // Bytes of the copied texts and ids (approximate: no allocator overhead).
  size_t bytes() const { return bytes_; }

 private:
  using Entry = std::pair<std::string, std::string>;  // (text, id)
  std::set<Entry> sorted_;
  std::unordered_map<std::string, std::set<Entry>::iterator> by_id_;
  size_t bytes_ = 0;
  size_t max_tie_scan_;
};

}  // namespace agentkv
