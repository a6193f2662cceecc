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
  // Every text with L' >= l starts with prompt[0:l]: scan that run.
  const std::string_view shared = prompt.substr(0, l);
  std::optional<Hit> best;
  size_t best_len = 0;
  size_t scanned = 0;
  for (auto it = set_lower(shared); it != sorted_.end() && scanned < max_tie_scan_; ++it, ++scanned) {
    const std::string_view text = it->first;
    if (text.substr(0, shared.size()) != shared) break;
    const size_t li = CommonPrefixBytes(text, prompt);
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
