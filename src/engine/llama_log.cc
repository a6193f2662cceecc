#include "engine/llama_log.h"

#include "util/log.h"

namespace agentkv::engine {

std::string LlamaLogLine(std::string_view text) {
  bool newline = false;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    newline = newline || text.back() == '\n';
    text.remove_suffix(1);
  }
  std::string line = EscapeForLog(text, kMaxLlamaLogLineBytes);
  if (newline) line.push_back('\n');
  return line;
}

}  // namespace agentkv::engine
