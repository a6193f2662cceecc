#include "api/sse.h"

namespace agentkv::api {

SseEncoder::SseEncoder(ResponseMeta meta, bool include_usage)
    : meta_(std::move(meta)), include_usage_(include_usage) {}

std::string SseEncoder::Frame(const std::string& json) const { return "data: " + json + "\n\n"; }

std::string SseEncoder::Start() {
  if (started_ || done_) return "";
  started_ = true;
  if (meta_.kind != RequestKind::kChat) return "";
  ChunkFields f;
  f.role = true;
  f.content = "";
  f.usage_null = include_usage_;
  return Frame(ChunkJson(meta_, f));
}

std::string SseEncoder::ContentChunk(std::string text) {
  if (text.empty()) return "";
  ChunkFields f;
  f.content = std::move(text);
  f.usage_null = include_usage_;
  return Frame(ChunkJson(meta_, f));
}

std::string SseEncoder::ReasoningChunk(std::string text) {
  if (text.empty()) return "";
  ChunkFields f;
  f.reasoning_content = std::move(text);
  f.usage_null = include_usage_;
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
  ChunkFields f;
  f.tool_call = delta;
  f.usage_null = include_usage_;
  return out + Frame(ChunkJson(meta_, f));
}

std::string SseEncoder::Finish(FinishReason reason, const Usage& usage) {
  if (done_) return "";
  std::string out = Start();
  out += ReasoningChunk(reasoning_utf8_.Flush());
  out += ContentChunk(utf8_.Flush());
  ChunkFields f;
  f.finish = reason;
  f.usage_null = include_usage_;
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
