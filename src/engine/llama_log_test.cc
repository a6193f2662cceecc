#include "engine/llama_log.h"

#include <gtest/gtest.h>

#include <string>

namespace agentkv::engine {
namespace {

TEST(LlamaLogLineTest, KeepsAPlainLine) {
  EXPECT_EQ(LlamaLogLine("llama_context: n_ctx = 1024\n"), "llama_context: n_ctx = 1024\n");
  EXPECT_EQ(LlamaLogLine("."), ".");  // a progress dot stays unterminated
}

TEST(LlamaLogLineTest, EscapesControlBytesAndInnerNewlines) {
  const std::string line = LlamaLogLine("grammar: \x1b[31mred\nagentkv error: forged\n\n");
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
  EXPECT_EQ(line.find('\n'), line.size() - 1);  // one line, ended once
  EXPECT_NE(line.find("\\x1b[31mred\\x0aagentkv error: forged"), std::string::npos) << line;
}

TEST(LlamaLogLineTest, CutsAMegabyteToTheBound) {
  const std::string line = LlamaLogLine(std::string(1 << 20, 'g') + "\n");
  EXPECT_LT(line.size(), kMaxLlamaLogLineBytes + 64);
  EXPECT_EQ(line.back(), '\n');
}

}  // namespace
}  // namespace agentkv::engine
