#pragma once
// Small statistics and formatting helpers shared by the benchmarks.

#include <chrono>
#include <string>
#include <vector>

namespace agentkv::bench {

// Median, min and max of a set of repetitions. Empty input gives n == 0 and
// zeros. The median of an even count is the mean of the two middle values.
struct Summary {
  double median = 0;
  double min = 0;
  double max = 0;
  int n = 0;
};
Summary Summarize(std::vector<double> values);

// Milliseconds elapsed since `t0` on the steady clock.
double MsSince(std::chrono::steady_clock::time_point t0);

// A GitHub Markdown table: `header` cells, then one line per row. Rows shorter
// than the header are padded with empty cells.
std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows);

// printf-style formatting into a std::string.
std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace agentkv::bench
