#include "api/generation_channel.h"

namespace agentkv::api {

namespace {

GenerationEvent MakeEvent(GenerationEvent::Kind kind) {
  GenerationEvent e;
  e.kind = kind;
  return e;
}

}  // namespace

void GenerationChannel::OnPromptUsage(const Usage& usage) { prompt_usage_ = usage; }

void GenerationChannel::OnStart() {
  GenerationEvent e = MakeEvent(GenerationEvent::Kind::kStart);
  e.usage = prompt_usage_;
  Push(std::move(e));
}

void GenerationChannel::OnDelta(std::string_view text) {
  if (text.empty()) return;
  GenerationEvent e = MakeEvent(GenerationEvent::Kind::kDelta);
  e.text.assign(text);
  Push(std::move(e));
}

void GenerationChannel::OnReasoningDelta(std::string_view text) {
  if (text.empty()) return;
  GenerationEvent e = MakeEvent(GenerationEvent::Kind::kReasoning);
  e.text.assign(text);
  Push(std::move(e));
}

void GenerationChannel::OnToolCallDelta(const ToolCallDelta& delta) {
  GenerationEvent e = MakeEvent(GenerationEvent::Kind::kToolCall);
  e.tool_call = delta;
  Push(std::move(e));
}

void GenerationChannel::OnLogprob(const TokenLogprob& logprob) {
  GenerationEvent e = MakeEvent(GenerationEvent::Kind::kLogprob);
  e.logprob = logprob;
  Push(std::move(e));
}

void GenerationChannel::OnFinish(FinishReason reason, const Usage& usage) {
  GenerationEvent e = MakeEvent(GenerationEvent::Kind::kFinish);
  e.finish = reason;
  e.usage = usage;
  Push(std::move(e));
}

void GenerationChannel::OnError(const Status& status) {
  GenerationEvent e = MakeEvent(GenerationEvent::Kind::kError);
  e.status = status;
  Push(std::move(e));
}

void GenerationChannel::Push(GenerationEvent event) {
  {
    MutexLock lock(&mu_);
    if (closed_) return;  // contract violation by the backend; drop quietly
    closed_ = event.terminal();
    GenerationEvent* last = events_.empty() ? nullptr : &events_.back();
    const bool text_kind = event.kind == GenerationEvent::Kind::kDelta || event.kind == GenerationEvent::Kind::kReasoning;
    if (text_kind && last != nullptr && last->kind == event.kind) {
      last->text += event.text;  // the reader is behind: coalesce
    } else if (event.kind == GenerationEvent::Kind::kToolCall && event.tool_call.id.empty() && last != nullptr &&
               last->kind == GenerationEvent::Kind::kToolCall && last->tool_call.index == event.tool_call.index) {
      last->tool_call.arguments += event.tool_call.arguments;  // same call: coalesce its arguments
    } else {
      events_.push_back(std::move(event));
    }
  }
  cv_.NotifyOne();
}

bool GenerationChannel::Wait(std::chrono::milliseconds timeout, std::vector<GenerationEvent>* out) {
  MutexLock lock(&mu_);
  // The predicate runs with mu_ held (CondVar::WaitFor); the analysis cannot see that.
  if (!cv_.WaitFor(&lock, timeout, [this]() NO_THREAD_SAFETY_ANALYSIS { return !events_.empty(); })) return false;
  for (GenerationEvent& e : events_) out->push_back(std::move(e));
  events_.clear();
  return true;
}

}  // namespace agentkv::api
