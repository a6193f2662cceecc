// prefix_index_bench: cost of one implicit-identity lookup, linear scan
// (FindLongestPrefixAgent) vs PrefixIndex, for namespaces of n agents whose
// texts share a system prompt. Prints one JSON object.
//   usage: prefix_index_bench [n ...]     (default: 1000 10000 30000)
// Each agent: a 1,024-byte shared system prompt + ~512 bytes of its own.
// Queries: "continue" (an agent's text + a new user turn: EXTEND) and "new"
// (the system prompt + a new user turn: every agent ties at the system
// prompt, the worst case of the index's tie scan). Every answer of the index
// is checked against the scan's.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "prefix/agent_lookup.h"
#include "prefix/prefix_index.h"

namespace {

std::string Words(std::mt19937& rng, size_t bytes) {
  static const char* kWords[] = {"mill", "river", "old", "man", "said", "the", "and", "stone", "bread", "wind"};
  std::string s;
  while (s.size() < bytes) s += std::string(kWords[rng() % 10]) + " ";
  return s;
}

template <typename F>
double MicrosPerCall(int calls, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f(i);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {1000, 10000, 30000};
  std::printf("{\"bench\":\"prefix_index\",\"system_prompt_bytes\":1024,\"own_bytes\":512,\"results\":[");
  for (size_t si = 0; si < sizes.size(); ++si) {
    const int n = sizes[si];
    std::mt19937 rng(7);
    const std::string system = "System: " + Words(rng, 1016);
    std::vector<std::string> ids, texts;
    agentkv::PrefixIndex index;
    for (int i = 0; i < n; ++i) {
      char id[32];
      std::snprintf(id, sizeof id, "agent-%08d", i);  // ids in the scan's (map) order
      ids.push_back(id);
      texts.push_back(system + "User " + std::to_string(i) + ": " + Words(rng, 500));
      index.Set(ids.back(), texts.back());
    }
    std::vector<std::string_view> views(texts.begin(), texts.end());
    const int kQueries = 200;
    std::vector<std::string> cont, fresh;
    for (int q = 0; q < kQueries; ++q) {
      cont.push_back(texts[rng() % n] + "User: and then? ");
      fresh.push_back(system + "User new " + std::to_string(q) + ": " + Words(rng, 40));
    }
    // Agent mismatches: another agent than the scan's (expected only when
    // more than 1,024 agents tie). Type mismatches: another match type by
    // MatchPrefix's rule (EXTEND if the whole text is shared, DIVERGE if
    // L >= 0.5 len, else MISS), which is what a request would see.
    const std::unordered_map<std::string, size_t> length_of = [&] {
      std::unordered_map<std::string, size_t> m;
      for (int i = 0; i < n; ++i) m[ids[i]] = texts[i].size();
      return m;
    }();
    auto type = [](size_t l, size_t len) { return l == len ? 0 : 2 * l >= len ? 1 : 2; };
    int mismatches = 0, type_mismatches = 0;
    for (const auto* qs : {&cont, &fresh}) {
      for (const auto& p : *qs) {
        auto a = agentkv::FindLongestPrefixAgent(views, p);
        auto b = index.FindLongestPrefix(p);
        if (a.has_value() != b.has_value()) {
          ++mismatches;
          ++type_mismatches;
        } else if (a && (ids[a->index] != b->id || a->common_bytes != b->common_bytes)) {
          ++mismatches;
          type_mismatches += type(a->common_bytes, texts[a->index].size()) != type(b->common_bytes, length_of.at(b->id));
        }
      }
    }
    volatile size_t sink = 0;
    const int linear_calls = n >= 10000 ? 20 : 100;
    const double lin_cont = MicrosPerCall(linear_calls, [&](int i) { sink = sink + agentkv::FindLongestPrefixAgent(views, cont[i % kQueries])->index; });
    const double lin_new = MicrosPerCall(linear_calls, [&](int i) { sink = sink + agentkv::FindLongestPrefixAgent(views, fresh[i % kQueries])->index; });
    const double idx_cont = MicrosPerCall(2000, [&](int i) { sink = sink + index.FindLongestPrefix(cont[i % kQueries])->common_bytes; });
    const double idx_new = MicrosPerCall(2000, [&](int i) { sink = sink + index.FindLongestPrefix(fresh[i % kQueries])->common_bytes; });
    std::printf("%s{\"agents\":%d,\"linear_continue_us\":%.1f,\"linear_new_us\":%.1f,\"index_continue_us\":%.2f,"
                "\"index_new_us\":%.2f,\"index_bytes\":%zu,\"queries\":%d,\"agent_mismatches\":%d,\"type_mismatches\":%d}",
                si ? "," : "", n, lin_cont, lin_new, idx_cont, idx_new, index.bytes(), 2 * kQueries, mismatches,
                type_mismatches);
    std::fflush(stdout);
  }
  std::printf("]}\n");
  return 0;
}
