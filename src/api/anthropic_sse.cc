#include "api/anthropic_sse.h"

namespace agentkv::api {

// The reply is one text block, index 0 (agentkv emits no thinking blocks).
constexpr int kTextBlock = 0;

std::string AnthropicSseEncoder::Start(const Usage& prompt_usage) {
  if (started_ || done_) return "";
  started_ = true;
  return MessageStartEvent(meta_, prompt_usage) + TextBlockStartEvent(kTextBlock) + PingEvent();
}

std::string AnthropicSseEncoder::TextDelta(const std::string& text) {
  return text.empty() ? "" : TextDeltaEvent(kTextBlock, text);
}

std::string AnthropicSseEncoder::Delta(std::string_view bytes) {
  if (done_) return "";
  std::string out = Start(Usage{});
  return out + TextDelta(utf8_.Push(bytes));
}

std::string AnthropicSseEncoder::Finish(FinishReason reason, const Usage& usage) {
  if (done_) return "";
  std::string out = Start(usage);
  out += TextDelta(utf8_.Flush());
  out += BlockStopEvent(kTextBlock);
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
