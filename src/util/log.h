#pragma once
// Minimal leveled logging to stderr. Thread-safe (one write per line).
// Level from AGENTKV_LOG=debug|info|warn|error (default info).

#include <cstdarg>
#include <cstddef>
#include <string>
#include <string_view>

namespace agentkv {

enum class LogLevel { kDebug = 0, kInfo, kWarn, kError };

void LogF(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
bool LogEnabled(LogLevel level);

// `s` made safe to log: control bytes (CR, LF, ESC, ...), DEL, backslash and
// bytes >= 0x80 become \xNN (backslash: \\), so client-supplied text can
// neither start a forged log line nor send terminal escapes. At most
// `max_bytes` input bytes are kept; longer input ends with "...(N bytes)".
std::string EscapeForLog(std::string_view s, size_t max_bytes = 256);

}  // namespace agentkv

#define AKV_LOG_DEBUG(...) ::agentkv::LogF(::agentkv::LogLevel::kDebug, __VA_ARGS__)
#define AKV_LOG_INFO(...) ::agentkv::LogF(::agentkv::LogLevel::kInfo, __VA_ARGS__)
#define AKV_LOG_WARN(...) ::agentkv::LogF(::agentkv::LogLevel::kWarn, __VA_ARGS__)
#define AKV_LOG_ERROR(...) ::agentkv::LogF(::agentkv::LogLevel::kError, __VA_ARGS__)
