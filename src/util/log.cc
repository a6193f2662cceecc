#include "util/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace agentkv {
namespace {

LogLevel LevelFromEnv() {
  const char* v = std::getenv("AGENTKV_LOG");
  if (v == nullptr) return LogLevel::kInfo;
  if (std::strcmp(v, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(v, "warn") == 0) return LogLevel::kWarn;
  if (std::strcmp(v, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

}  // namespace

bool LogEnabled(LogLevel level) {
  static const LogLevel min_level = LevelFromEnv();  // read once; immutable after
  return level >= min_level;
}

void LogF(LogLevel level, const char* fmt, ...) {
  if (!LogEnabled(level)) return;
  static const char* const kNames[] = {"debug", "info", "warn", "error"};
  char body[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  std::string line = std::string("agentkv ") + kNames[static_cast<int>(level)] + ": " + body + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace agentkv
