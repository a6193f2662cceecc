#pragma once
// How a line llama.cpp logs is written to our log. Its lines can carry a
// request's text (a grammar, the text a lazy grammar triggered on), so each
// is escaped (util/log.h EscapeForLog: no control bytes, no terminal
// escapes, no forged line) and cut to kMaxLlamaLogLineBytes.

#include <cstddef>
#include <string>
#include <string_view>

namespace agentkv::engine {

// 512 bytes: llama.cpp's own diagnostics (load, context, grammar errors) fit
// in one line; what is longer is a request's text, not worth 1 MB of log.
inline constexpr size_t kMaxLlamaLogLineBytes = 512;

// `text` (one llama.cpp log call) as written to stderr: escaped, at most
// kMaxLlamaLogLineBytes of it (then "...(N bytes)"), ending in one '\n' when
// `text` ended in newlines (a chunk without one, such as a progress dot,
// stays unterminated).
std::string LlamaLogLine(std::string_view text);

}  // namespace agentkv::engine
