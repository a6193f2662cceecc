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
  // One event, one line: a CR/LF (or other control byte) that reached the
  // message from outside cannot forge a second line.
  std::string line = std::string("agentkv ") + kNames[static_cast<int>(level)] + ": ";
  for (const char* p = body; *p != '\0'; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      line += "\\x";
      line += kHex[c >> 4];
      line += kHex[c & 15];
    } else {
      line += static_cast<char>(c);
    }
  }
  line += "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

std::string EscapeForLog(std::string_view s, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t n = s.size() < max_bytes ? s.size() : max_bytes;
  out.reserve(n + 16);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (n < s.size()) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace agentkv
