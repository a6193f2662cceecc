#pragma once
// FakeBackend: a deterministic Backend for api/ tests.
//
// Reply = reply_prefix + the last user message (or the prompt), emitted in
// pieces of `delta_bytes` bytes (so multi-byte characters get split), one
// "token" per piece. Stop strings and max_tokens are honoured the way the
// real scheduler must: a possible partial stop match is held back. Each
// request runs on its own thread; the destructor joins them.

#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "api/backend.h"

namespace agentkv::api {

class FakeBackend final : public Backend {
 public:
  struct Config {
    std::string model_id = "fake-model";
    int64_t context_tokens = 4096;
    std::string reply_prefix = "Echo: ";
    size_t delta_bytes = 3;
    int delay_ms = 0;         // before each delta
    int repeat = 1;           // the echoed text, repeated
    Status submit_status;     // non-OK: Submit refuses with it
    Status error_before_start;  // non-OK: OnError instead of OnStart
    int error_after_deltas = -1;  // >= 0: OnError(Internal) after that many deltas
  };

  FakeBackend() = default;
  explicit FakeBackend(Config config) : config_(std::move(config)) {}
  ~FakeBackend() override;

  void set_ready(bool ready) { ready_.store(ready); }
  Config& config() { return config_; }  // REQUIRES: no request in flight

  std::string ModelId() const override { return config_.model_id; }
  bool IsReady() const override { return ready_.load(); }
  int64_t ContextTokens() const override { return config_.context_tokens; }
  // 1 token per byte + 4 per message; Submit refuses >= context_tokens.
  int64_t CountPromptTokens(const GenerationRequest& request) const;
  int64_t MaxPromptBytes() const override { return config_.context_tokens; }
  Status Submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) override;
  Result<std::vector<AgentInfo>> ListAgents(const std::string& namespace_id) override;
  Result<AgentInfo> GetAgent(const std::string& namespace_id, const std::string& agent_id) override;
  Status DeleteAgent(const std::string& namespace_id, const std::string& agent_id,
                     bool evict_only) override;
  std::string MetricsText() const override;

  // Test inspection.
  int submitted() const { return submitted_.load(); }  // accepted by Submit
  int submit_calls() const { return submit_calls_.load(); }  // tokenizations, accepted or not
  int cancelled() const { return cancelled_.load(); }
  int finished() const { return finished_.load(); }
  GenerationRequest last_request() const;
  void AddAgent(const std::string& namespace_id, AgentInfo info);
  // Blocks until every request thread has ended.
  void JoinAll();

 private:
  void Run(GenerationRequest request, std::shared_ptr<GenerationSink> sink);

  Config config_;
  std::atomic<bool> ready_{true};
  std::atomic<int> submitted_{0};
  std::atomic<int> submit_calls_{0};
  std::atomic<int> cancelled_{0};
  std::atomic<int> finished_{0};
  mutable std::mutex mu_;
  GenerationRequest last_request_;                               // guarded by mu_
  std::map<std::string, std::map<std::string, AgentInfo>> agents_;  // guarded by mu_
  std::vector<std::thread> threads_;                             // guarded by mu_
};

// The full reply FakeBackend produces for `request`, before stop/max_tokens.
std::string FakeReply(const FakeBackend::Config& config, const GenerationRequest& request);

}  // namespace agentkv::api
