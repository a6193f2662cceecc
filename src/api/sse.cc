#include "api/sse.h"

namespace agentkv::api {

SseEncoder::SseEncoder(ResponseMeta meta, bool include_usage)
    : meta_(std::move(meta)), include_usage_(include_usage) {}

std::string SseEncoder::Frame(const std::string& json) const { return "data: " + json + "\n\n"; }

ChunkFields SseEncoder::NewChunk() {
  ChunkFields f;
  f.usage_null = include_usage_;
  f.text_offset = logprob_offset_;
  for (const TokenLogprob& t : held_logprobs_) logprob_offset_ += static_cast<int64_t>(t.token.size());
  f.logprobs = std::move(held_logprobs_);
  held_logprobs_.clear();
  return f;
}

std::string SseEncoder::Logprob(const TokenLogprob& logprob) {
  if (!done_) held_logprobs_.push_back(logprob);
  return "";
}

std::string SseEncoder::Start() {
  if (started_ || done_) return "";
  started_ = true;
  if (meta_.kind != RequestKind::kChat) return "";
  ChunkFields f;  // the role chunk: no token sampled yet
  f.role = true;
  f.content = "";
  f.usage_null = include_usage_;
  return Frame(ChunkJson(meta_, f));
}

std::string SseEncoder::ContentChunk(std::string text) {
  if (text.empty()) return "";
  ChunkFields f = NewChunk();
  f.content = std::move(text);
  return Frame(ChunkJson(meta_, f));
}

std::string SseEncoder::ReasoningChunk(std::string text) {
  if (text.empty()) return "";
  ChunkFields f = NewChunk();
  f.reasoning_content = std::move(text);
  return Frame(ChunkJson(meta_, f));
}

std::string SseEncoder::Delta(std::string_view bytes) {
  if (done_) return "";
  std::string out = Start();
  out += ReasoningChunk(reasoning_utf8_.Flush());
  return out + ContentChunk(utf8_.Push(bytes));
}

std::string SseEncoder::Reasoning(std::string_view bytes) {
  if (done_) return "";
  std::string out = Start();
  out += ContentChunk(utf8_.Flush());
  return out + ReasoningChunk(reasoning_utf8_.Push(bytes));
}

std::string SseEncoder::ToolCall(const ToolCallDelta& delta) {
  if (done_) return "";
  std::string out = Start();
  out += ReasoningChunk(reasoning_utf8_.Flush());
  out += ContentChunk(utf8_.Flush());
  ChunkFields f = NewChunk();
  f.tool_call = delta;
  return out + Frame(ChunkJson(meta_, f));
}

std::string SseEncoder::Finish(FinishReason reason, const Usage& usage) {
  if (done_) return "";
  std::string out = Start();
  out += ReasoningChunk(reasoning_utf8_.Flush());
  out += ContentChunk(utf8_.Flush());
  ChunkFields f = NewChunk();
  f.finish = reason;
  if (meta_.kind != RequestKind::kChat) f.content = "";
  out += Frame(ChunkJson(meta_, f));
  if (include_usage_) out += Frame(UsageChunkJson(meta_, usage));
  out += "data: [DONE]\n\n";
  done_ = true;
  return out;
}

std::string SseEncoder::Error(const ApiError& error) {
  if (done_) return "";
  done_ = true;
  return Frame(ApiErrorJson(error));
}

}  // namespace agentkv::api
