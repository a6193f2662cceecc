#include "bench/stats.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace agentkv::bench {

Summary Summarize(std::vector<double> values) {
  Summary s;
  s.n = static_cast<int>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  s.median = values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
  s.min = values.front();
  s.max = values.back();
  return s;
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows) {
  auto line = [&header](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (size_t i = 0; i < header.size(); ++i) out += " " + (i < cells.size() ? cells[i] : std::string()) + " |";
    return out + "\n";
  };
  std::string out = line(header) + "|";
  for (size_t i = 0; i < header.size(); ++i) out += " --- |";
  out += "\n";
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string Format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[512];
  const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(out.data(), out.size(), fmt, ap);
  va_end(ap);
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace agentkv::bench
