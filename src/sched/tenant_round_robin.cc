#include "sched/tenant_round_robin.h"

#include <algorithm>
#include <tuple>

namespace agentkv::sched {

std::vector<size_t> TenantRoundRobin::Order(const std::vector<std::string_view>& queue, const Counts& running) {
  std::erase_if(last_admitted_, [&](const auto& entry) {
    return !running.count(entry.first) && std::find(queue.begin(), queue.end(), entry.first) == queue.end();
  });
  struct Key {
    size_t rank;
    uint64_t last_admitted;
    size_t index;
  };
  std::vector<Key> keys;
  keys.reserve(queue.size());
  Counts ahead;  // per tenant: its requests seen so far in the queue, plus its running turns
  for (size_t i = 0; i < queue.size(); ++i) {
    auto it = ahead.find(queue[i]);
    if (it == ahead.end()) {
      auto r = running.find(queue[i]);
      it = ahead.emplace(std::string(queue[i]), r == running.end() ? 0 : r->second).first;
    }
    auto last = last_admitted_.find(queue[i]);
    keys.push_back({it->second++, last == last_admitted_.end() ? 0 : last->second, i});
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return std::tie(a.rank, a.last_admitted, a.index) < std::tie(b.rank, b.last_admitted, b.index);
  });
  std::vector<size_t> order;
  order.reserve(keys.size());
  for (const Key& k : keys) order.push_back(k.index);
  return order;
}

void TenantRoundRobin::Admitted(std::string_view tenant) {
  auto it = last_admitted_.find(tenant);
  if (it == last_admitted_.end()) it = last_admitted_.emplace(std::string(tenant), 0).first;
  it->second = ++clock_;
}

}  // namespace agentkv::sched
