#include "api/anthropic_sse.h"

namespace agentkv::api {

std::string AnthropicSseEncoder::Start(const Usage& prompt_usage) {
  if (started_ || done_) return "";
  started_ = true;
  return MessageStartEvent(meta_, prompt_usage);
}

std::string AnthropicSseEncoder::OpenBlock(BlockKind kind, const std::string& id, const std::string& name) {
  std::string out = CloseBlock();
  open_index_ = next_index_++;
  open_kind_ = kind;
  switch (kind) {
    case BlockKind::kText: out += TextBlockStartEvent(open_index_); break;
    case BlockKind::kThinking: out += ThinkingBlockStartEvent(open_index_); break;
    case BlockKind::kToolUse:
      out += ToolUseBlockStartEvent(open_index_, id, name);
      last_tool_index_ = open_index_;
      break;
  }
  if (open_index_ == 0) out += PingEvent();  // where Anthropic sends it
  return out;
}

std::string AnthropicSseEncoder::CloseBlock() {
  if (open_index_ < 0) return "";
  const int index = open_index_;
  open_index_ = -1;
  std::string out = open_kind_ == BlockKind::kThinking ? SignatureDeltaEvent(index) : "";
  return out + BlockStopEvent(index);
}

std::string AnthropicSseEncoder::TextDelta(const std::string& text) {
  if (text.empty()) return "";
  std::string out;
  if (open_index_ < 0 || open_kind_ != BlockKind::kText) out += OpenBlock(BlockKind::kText);
  return out + TextDeltaEvent(open_index_, text);
}

std::string AnthropicSseEncoder::FlushPending() {
  std::string out;
  const std::string thinking = thinking_utf8_.Flush();
  if (!thinking.empty()) {
    if (open_index_ < 0 || open_kind_ != BlockKind::kThinking) out += OpenBlock(BlockKind::kThinking);
    out += ThinkingDeltaEvent(open_index_, thinking);
  }
  return out + TextDelta(utf8_.Flush());
}

std::string AnthropicSseEncoder::Delta(std::string_view bytes) {
  if (done_) return "";
  std::string out = Start(Usage{});
  const std::string thinking = thinking_utf8_.Flush();
  if (!thinking.empty()) {
    if (open_index_ < 0 || open_kind_ != BlockKind::kThinking) out += OpenBlock(BlockKind::kThinking);
    out += ThinkingDeltaEvent(open_index_, thinking);
  }
  return out + TextDelta(utf8_.Push(bytes));
}

std::string AnthropicSseEncoder::Reasoning(std::string_view bytes) {
  if (done_ || !meta_.thinking) return "";
  std::string out = Start(Usage{});
  out += TextDelta(utf8_.Flush());
  const std::string thinking = thinking_utf8_.Push(bytes);
  if (thinking.empty()) return out;
  if (open_index_ < 0 || open_kind_ != BlockKind::kThinking) out += OpenBlock(BlockKind::kThinking);
  return out + ThinkingDeltaEvent(open_index_, thinking);
}

std::string AnthropicSseEncoder::ToolCall(const ToolCallDelta& delta) {
  if (done_) return "";
  std::string out = Start(Usage{});
  out += FlushPending();  // thinking and text written before the call
  if (!delta.id.empty() || last_tool_index_ < 0) out += OpenBlock(BlockKind::kToolUse, delta.id, delta.name);
  if (!delta.arguments.empty()) out += InputJsonDeltaEvent(last_tool_index_, delta.arguments);
  return out;
}

std::string AnthropicSseEncoder::Finish(FinishReason reason, const Usage& usage) {
  if (done_) return "";
  std::string out = Start(usage);
  out += FlushPending();
  if (next_index_ == 0) out += OpenBlock(BlockKind::kText);  // no output at all: one empty text block
  out += CloseBlock();
  out += MessageDeltaEvent(reason, usage);
  out += MessageStopEvent();
  done_ = true;
  return out;
}

std::string AnthropicSseEncoder::Error(const ApiError& error) {
  if (done_) return "";
  done_ = true;
  return ErrorEvent(AnthropicError(error));
}

}  // namespace agentkv::api
