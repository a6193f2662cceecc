#include "api/anthropic_sse.h"

namespace agentkv::api {

std::string AnthropicSseEncoder::Start(const Usage& prompt_usage) {
  if (started_ || done_) return "";
  started_ = true;
  return MessageStartEvent(meta_, prompt_usage);
}

std::string AnthropicSseEncoder::OpenBlock(bool text, const std::string& id, const std::string& name) {
  std::string out = CloseBlock();
  open_index_ = next_index_++;
  open_is_text_ = text;
  out += text ? TextBlockStartEvent(open_index_) : ToolUseBlockStartEvent(open_index_, id, name);
  if (!text) last_tool_index_ = open_index_;
  if (open_index_ == 0) out += PingEvent();  // where Anthropic sends it
  return out;
}

std::string AnthropicSseEncoder::CloseBlock() {
  if (open_index_ < 0) return "";
  const int index = open_index_;
  open_index_ = -1;
  return BlockStopEvent(index);
}

std::string AnthropicSseEncoder::TextDelta(const std::string& text) {
  if (text.empty()) return "";
  std::string out;
  if (open_index_ < 0 || !open_is_text_) out += OpenBlock(/*text=*/true);
  return out + TextDeltaEvent(open_index_, text);
}

std::string AnthropicSseEncoder::Delta(std::string_view bytes) {
  if (done_) return "";
  std::string out = Start(Usage{});
  return out + TextDelta(utf8_.Push(bytes));
}

std::string AnthropicSseEncoder::ToolCall(const ToolCallDelta& delta) {
  if (done_) return "";
  std::string out = Start(Usage{});
  out += TextDelta(utf8_.Flush());  // text written before the call
  if (!delta.id.empty() || last_tool_index_ < 0) out += OpenBlock(/*text=*/false, delta.id, delta.name);
  if (!delta.arguments.empty()) out += InputJsonDeltaEvent(last_tool_index_, delta.arguments);
  return out;
}

std::string AnthropicSseEncoder::Finish(FinishReason reason, const Usage& usage) {
  if (done_) return "";
  std::string out = Start(usage);
  out += TextDelta(utf8_.Flush());
  if (next_index_ == 0) out += OpenBlock(/*text=*/true);  // no output at all: one empty text block
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
