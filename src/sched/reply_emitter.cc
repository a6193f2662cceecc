#include "sched/reply_emitter.h"

#include <algorithm>

#include "sched/chat_request.h"

namespace agentkv::sched {
namespace {

void SendReplyDelta(api::GenerationSink& sink, const engine::ReplyDelta& d) {
  if (!d.reasoning_content.empty()) sink.OnReasoningDelta(d.reasoning_content);
  if (!d.content.empty()) sink.OnDelta(d.content);
  if (d.tool_call) sink.OnToolCallDelta({d.tool_call->index, d.tool_call->id, d.tool_call->name, d.tool_call->arguments});
}

}  // namespace

ReplyEmitter::ReplyEmitter(api::GenerationSink& sink, const std::vector<std::string>& stops,
                           std::shared_ptr<const engine::ReplyFormat> format)
    : sink_(sink), stops_(stops) {
  for (const auto& stop : stops_) max_stop_len_ = std::max(max_stop_len_, stop.size());
  if (format) parser_ = std::make_unique<engine::ReplyParser>(std::move(format), NewToolCallId);
}

ReplyEmitter::~ReplyEmitter() = default;

bool ReplyEmitter::Append(std::string_view piece) {
  // Only the new text, and what a stop string could have begun before it, is searched.
  const size_t scan_from = out_.size() > max_stop_len_ ? out_.size() - max_stop_len_ : 0;
  out_ += piece;
  size_t stop_at = std::string::npos;
  const std::string* matched = nullptr;
  for (const auto& stop : stops_) {
    const size_t at = out_.find(stop, scan_from);
    if (at != std::string::npos && at < stop_at) {
      stop_at = at;
      matched = &stop;
    }
  }
  if (matched != nullptr) {
    out_.resize(stop_at);
    stop_sequence_ = *matched;
    return true;
  }
  const size_t hold = max_stop_len_ > 0 ? max_stop_len_ - 1 : 0;
  const size_t safe = out_.size() > hold ? out_.size() - hold : 0;
  if (safe > emitted_) {
    Send(std::string_view(out_).substr(emitted_, safe - emitted_));
    emitted_ = safe;
  }
  return false;
}

api::FinishReason ReplyEmitter::Finish(api::FinishReason reason) {
  if (out_.size() > emitted_) Send(std::string_view(out_).substr(emitted_));
  emitted_ = out_.size();
  if (!parser_) return reason;
  for (const engine::ReplyDelta& d : parser_->Finish()) SendReplyDelta(sink_, d);
  return parser_->tool_calls() > 0 && reason == api::FinishReason::kStop ? api::FinishReason::kToolCalls : reason;
}

void ReplyEmitter::Send(std::string_view text) {
  if (!parser_) {
    sink_.OnDelta(text);
    return;
  }
  for (const engine::ReplyDelta& d : parser_->Append(text)) SendReplyDelta(sink_, d);
}

}  // namespace agentkv::sched
