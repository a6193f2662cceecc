#include "api/fake_backend.h"

#include <algorithm>
#include <chrono>

namespace agentkv::api {

std::string FakeReply(const FakeBackend::Config& config, const GenerationRequest& request) {
  std::string text = request.prompt;
  if (request.kind == RequestKind::kChat) {
    for (const ChatMessage& m : request.messages) {
      if (m.role == Role::kUser) text = m.content;
    }
  }
  std::string reply = config.reply_prefix;
  for (int i = 0; i < config.repeat; ++i) reply += text;
  return reply;
}

FakeBackend::~FakeBackend() { JoinAll(); }

void FakeBackend::JoinAll() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

int64_t FakeBackend::CountPromptTokens(const GenerationRequest& request) const {
  int64_t n = static_cast<int64_t>(request.prompt.size());
  for (const ChatMessage& m : request.messages) n += static_cast<int64_t>(m.content.size()) + 4;
  return n;
}

Status FakeBackend::Submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) {
  submit_calls_.fetch_add(1);
  if (!config_.submit_status.ok()) return config_.submit_status;
  if (CountPromptTokens(request) >= config_.context_tokens) {
    return Status::OutOfRange("The prompt is " + std::to_string(CountPromptTokens(request)) + " tokens.")
        .WithQuantity({CountPromptTokens(request), config_.context_tokens});
  }
  submitted_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  last_request_ = request;
  threads_.emplace_back(&FakeBackend::Run, this, std::move(request), std::move(sink));
  return Status::OK();
}

void FakeBackend::Run(GenerationRequest request, std::shared_ptr<GenerationSink> sink) {
  if (!config_.error_before_start.ok()) {
    sink->OnError(config_.error_before_start);
    return;
  }
  Usage usage;
  usage.prompt_tokens = CountPromptTokens(request);
  usage.agent_id = request.agent_id.empty() ? "implicit-1" : request.agent_id;
  usage.tokens_prefilled = usage.prompt_tokens;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& ns = agents_[request.namespace_id];
    if (auto it = ns.find(usage.agent_id); it != ns.end()) {
      usage.cached_tokens = it->second.tokens;
      usage.tokens_prefilled = usage.prompt_tokens - usage.cached_tokens;
      usage.cache_state = CacheState::kResident;
      usage.match = MatchType::kExtend;
    }
  }
  sink->OnPromptUsage(usage);
  sink->OnStart();
  const std::string reply = FakeReply(config_, request);
  // The reply up to the first stop string; `hold` keeps back bytes that
  // could still begin a stop string, as the real scheduler must.
  size_t end = reply.size();
  bool stopped = false;
  for (const std::string& s : request.sampling.stop) {
    const size_t at = reply.find(s);
    if (at != std::string::npos && at < end) {
      end = at;
      stopped = true;
      usage.stop_sequence = s;
    }
  }
  FinishReason reason = stopped ? FinishReason::kStop : FinishReason::kStop;
  size_t pos = 0;
  int deltas = 0;
  while (pos < end) {
    if (config_.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(config_.delay_ms));
    if (request.cancel.cancelled()) {
      cancelled_.fetch_add(1);
      sink->OnFinish(FinishReason::kCancelled, usage);
      return;
    }
    if (config_.error_after_deltas >= 0 && deltas == config_.error_after_deltas) {
      sink->OnError(Status::Internal("fake: injected failure"));
      return;
    }
    if (request.sampling.max_tokens && deltas == *request.sampling.max_tokens) {
      reason = FinishReason::kLength;
      break;
    }
    const size_t n = std::min(config_.delta_bytes, end - pos);
    if (request.sampling.top_logprobs >= 0) {  // each delta is one "token": logprob -(its index + 1)
      TokenLogprob lp{reply.substr(pos, n), -1.0f * float(deltas + 1), {}};
      for (int32_t k = 0; k < request.sampling.top_logprobs; ++k) {
        lp.top.push_back({"alt" + std::to_string(k), -1.0f * float(deltas + 1) - float(k)});
      }
      sink->OnLogprob(lp);
    }
    sink->OnDelta(std::string_view(reply).substr(pos, n));
    pos += n;
    ++deltas;
  }
  usage.completion_tokens = deltas;
  if (reason == FinishReason::kLength) usage.stop_sequence.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& ns = agents_[request.namespace_id];
    AgentInfo& a = ns[usage.agent_id];
    if (a.id.empty()) a.id = usage.agent_id;
    a.tier = CacheState::kResident;
    a.tokens = usage.prompt_tokens + deltas;
    a.ram_bytes = a.tokens * 100;
  }
  usage.ttft_ms = 1.5;
  finished_.fetch_add(1);
  sink->OnFinish(reason, usage);
}

Result<std::vector<AgentInfo>> FakeBackend::ListAgents(const std::string& namespace_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<AgentInfo> out;
  for (const auto& [id, info] : agents_[namespace_id]) out.push_back(info);
  return out;
}

Result<AgentInfo> FakeBackend::GetAgent(const std::string& namespace_id, const std::string& agent_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& ns = agents_[namespace_id];
  auto it = ns.find(agent_id);
  if (it == ns.end()) return Status::NotFound("agent '" + agent_id + "' not found");
  return it->second;
}

Status FakeBackend::DeleteAgent(const std::string& namespace_id, const std::string& agent_id,
                                bool evict_only) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& ns = agents_[namespace_id];
  auto it = ns.find(agent_id);
  if (it == ns.end()) return Status::NotFound("agent '" + agent_id + "' not found");
  if (it->second.busy) return Status::FailedPrecondition("agent '" + agent_id + "' is busy");
  if (evict_only) {
    it->second.disk_bytes = it->second.ram_bytes;
    it->second.ram_bytes = 0;
    it->second.tier = CacheState::kWarm;
  } else {
    ns.erase(it);
  }
  return Status::OK();
}

std::string FakeBackend::MetricsText() const {
  return "# TYPE agentkv_requests_total counter\nagentkv_requests_total " +
         std::to_string(submitted_.load()) + "\n";
}

GenerationRequest FakeBackend::last_request() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_request_;
}

void FakeBackend::AddAgent(const std::string& namespace_id, AgentInfo info) {
  std::lock_guard<std::mutex> lock(mu_);
  agents_[namespace_id][info.id] = std::move(info);
}

}  // namespace agentkv::api
