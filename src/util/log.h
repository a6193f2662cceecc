#pragma once
// Minimal leveled logging to stderr. Thread-safe (one write per line).
// Level from AGENTKV_LOG=debug|info|warn|error (default info).

#include <cstdarg>

namespace agentkv {

enum class LogLevel { kDebug = 0, kInfo, kWarn, kError };

void LogF(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
bool LogEnabled(LogLevel level);

}  // namespace agentkv

#define AKV_LOG_DEBUG(...) ::agentkv::LogF(::agentkv::LogLevel::kDebug, __VA_ARGS__)
#define AKV_LOG_INFO(...) ::agentkv::LogF(::agentkv::LogLevel::kInfo, __VA_ARGS__)
#define AKV_LOG_WARN(...) ::agentkv::LogF(::agentkv::LogLevel::kWarn, __VA_ARGS__)
#define AKV_LOG_ERROR(...) ::agentkv::LogF(::agentkv::LogLevel::kError, __VA_ARGS__)
