#include "prefix/prefix_index.h"

#include <algorithm>
#include <iterator>

#include "prefix/prefix_match.h"

namespace agentkv {
namespace {

constexpr size_t kEntryOverhead = 96;  // set node + hash node, roughly

}  // namespace

void PrefixIndex::Set(const std::string& id, std::string_view text) {
  auto found = by_id_.find(id);
  if (found != by_id_.end()) {
    if (found->second->first == text) return;
    Remove(id);
  }
  if (text.empty()) return;
  auto it = sorted_.emplace(std::string(text), id).first;
  by_id_.emplace(id, it);
  bytes_ += text.size() + 2 * id.size() + kEntryOverhead;
}

void PrefixIndex::Remove(const std::string& id) {
  auto found = by_id_.find(id);
  if (found == by_id_.end()) return;
  bytes_ -= found->second->first.size() + 2 * id.size() + kEntryOverhead;
  sorted_.erase(found->second);
  by_id_.erase(found);
}

std::optional<PrefixIndex::Hit> PrefixIndex::FindLongestPrefix(std::string_view prompt) const {
  if (sorted_.empty() || prompt.empty()) return std::nullopt;
  // (text, "") precedes every entry with that text.
  auto set_lower = [this](std::string_view text) { return sorted_.lower_bound(Entry(std::string(text), std::string())); };
  auto at = set_lower(prompt);
  size_t l = 0;
  if (at != sorted_.end()) l = CommonPrefixBytes(at->first, prompt);
  if (at != sorted_.begin()) l = std::max(l, CommonPrefixBytes(std::prev(at)->first, prompt));
  if (l == 0) return std::nullopt;
  // Every text with L' >= l starts with prompt[0:l]: they form the run
  // [lower_bound(shared), lower_bound(shared's successor)). Each shares
  // exactly l bytes (l is the maximum), so only the bytes after l and the
  // lengths are compared: O(1) per entry, mostly.
  const std::string_view shared = prompt.substr(0, l);
  std::string successor(shared);  // the least string greater than every string starting with `shared`
  while (!successor.empty() && static_cast<unsigned char>(successor.back()) == 0xFF) successor.pop_back();
  if (!successor.empty()) successor.back() = static_cast<char>(static_cast<unsigned char>(successor.back()) + 1);
  const auto run_end = successor.empty() ? sorted_.end() : set_lower(successor);
  std::optional<Hit> best;
  size_t best_len = 0;
  size_t scanned = 0;
  for (auto it = set_lower(shared); it != run_end && scanned < max_tie_scan_; ++it, ++scanned) {
    const std::string_view text = it->first;
    const size_t li = l + CommonPrefixBytes(text.substr(l), prompt.substr(l));
    const bool better = !best || li > best->common_bytes ||
                        (li == best->common_bytes &&
                         (text.size() < best_len || (text.size() == best_len && it->second < best->id)));
    if (better) {
      best = Hit{it->second, li};
      best_len = text.size();
    }
  }
  return best;
}

}  // namespace agentkv
