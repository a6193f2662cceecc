#pragma once
// The scheduler tests' fixture: a server stack (context, store, pool,
// scheduler) on the bundled model over a per-test cache directory, restartable
// over the same directory. Every test also checks that the inference thread
// never touched the disk.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/context.h"
#include "engine/test_support.h"
#include "engine/tokenizer.h"
#include "sched/scheduler.h"
#include "sched/test_sink.h"
#include "store/file_system.h"
#include "store/hooked_file_system_test_util.h"

namespace agentkv::sched {

using testing::RecordingSink;

// Top-2 logit gap under which two batch shapes may pick different tokens
// (GreedyTextBeforeNearTie): the two CPU attention paths over a q4_0 cache
// were seen to flip a choice with a gap of 0.088 on the bundled model; 0.25
// leaves a margin of ~3x.
inline constexpr float kTie = 0.25f;

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = std::move(engine::Model::Load(engine::testing::BundledModelPath())).value().release();
  }
  static void TearDownTestSuite() { delete model_; }

  void SetUp() override {
    forbidden_at_start_ = ForbiddenFileAccesses();
    dir_ = std::filesystem::temp_directory_path() /
           ("agentkv_sched_test_" + std::to_string(::getpid()) + "_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));  // per process: runs side by side never share it
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    Shutdown();
    // The rule of the inference thread: it never touched the disk.
    EXPECT_EQ(ForbiddenFileAccesses(), forbidden_at_start_);
    std::filesystem::remove_all(dir_);
  }

  // The value of an unlabelled metric in /metrics (-1 when absent).
  double Metric(const std::string& name) const {
    const std::string text = sched_->MetricsText();
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 2));
  }

  // (Re)starts a server stack over the same cache directory.
  // `fs`: the store's file system (default: the real disk).
  void Boot(int slots = 4, size_t pool_bytes = 64u << 20, SchedulerOptions opt = {}, int slot_ctx = 1024,
            FileSystem* fs = nullptr) {
    Shutdown();
    engine::ContextOptions o;
    o.n_slots = slots;
    o.slot_ctx = slot_ctx;
    o.n_threads = 2;
    o.slot_type_k = o.slot_type_v = slot_kv_;  // unset: q4_0 slots, as the blocks
    ctx_ = std::move(engine::Context::Create(*model_, o)).value();
    AgentStoreOptions so;
    so.cache_dir = dir_.string();
    so.fs = fs;
    so.fingerprint = ctx_->spec().fingerprint;
    so.kv_types = ctx_->spec().KvTypesString();
    store_ = std::move(AgentStore::Open(so)).value();
    BlockPoolOptions po;
    po.budget_bytes = pool_bytes;
    pool_ = std::make_unique<BlockPool>(po);
    opt.model_id = "test";
    sched_ = std::make_unique<Scheduler>(*model_, *ctx_, *pool_, store_.get(), opt);
    sched_->Start();
  }
  // The slots' KV type for the next Boot (hybrid slots); unset: the at-rest type.
  std::optional<engine::KvType> slot_kv_;

  void Shutdown() {
    if (sched_) sched_->Stop();
    sched_.reset();
    pool_.reset();
    store_.reset();
    ctx_.reset();
  }

  // A greedy completion request of namespace "default".
  static api::GenerationRequest Request(const std::string& agent, const std::string& prompt, int max_tokens = 16) {
    api::GenerationRequest r;
    r.namespace_id = "default";
    r.agent_id = agent;
    r.kind = api::RequestKind::kCompletion;
    r.prompt = prompt;
    r.sampling.temperature = 0;
    r.sampling.max_tokens = max_tokens;
    return r;
  }
  // Request() of namespace `ns`: a tenant of its own.
  static api::GenerationRequest TenantRequest(const std::string& ns, const std::string& agent,
                                              const std::string& prompt, int max_tokens = 16) {
    api::GenerationRequest r = Request(agent, prompt, max_tokens);
    r.namespace_id = ns;
    return r;
  }
  std::shared_ptr<RecordingSink> Send(api::GenerationRequest r) {
    auto sink = std::make_shared<RecordingSink>();
    EXPECT_TRUE(sched_->Submit(std::move(r), sink).ok());
    return sink;
  }
  std::shared_ptr<RecordingSink> Send(const std::string& agent, const std::string& prompt, int max_tokens = 16,
                                      std::vector<std::string> stop = {},
                                      api::CancellationToken cancel = {}) {
    api::GenerationRequest r = Request(agent, prompt, max_tokens);
    r.sampling.stop = std::move(stop);
    r.cancel = cancel;
    return Send(std::move(r));
  }
  // Sends `r`, waits for it and expects success.
  std::shared_ptr<RecordingSink> Run(api::GenerationRequest r) {
    auto s = Send(std::move(r));
    s->Wait();
    EXPECT_TRUE(s->error().ok()) << s->error().ToString();
    return s;
  }
  std::shared_ptr<RecordingSink> Run(const std::string& agent, const std::string& prompt, int max_tokens = 16) {
    return Run(Request(agent, prompt, max_tokens));
  }

  // Agent `agent` answers `prompt` (8 tokens) on a 2-slot scheduler over
  // `fs`, its save lands, and the scheduler restarts: the agent is on disk
  // only. Returns its reply.
  std::string SaveAgentThenRestart(const std::string& agent, const std::string& prompt, FileSystem* fs,
                                   SchedulerOptions after_restart = {}) {
    Boot(2, 64u << 20, {}, 1024, fs);
    const std::string reply = Run(agent, prompt, 8)->text();
    sched_->FlushSaves();
    Boot(2, 64u << 20, after_restart, 1024, fs);
    return reply;
  }

  // The oracle across batch shapes (see scheduler_test.cc's file comment):
  // the text of `prompt`'s greedy reply (n tokens) up to, not including, its
  // first near-tie step (top-2 logit gap below `tie`), computed on a context
  // of its own, and how many tokens that is. Replies of the same prompt
  // computed in other batch shapes must start with it.
  struct SureText {
    std::string text;
    int tokens = 0;
  };
  SureText GreedyTextBeforeNearTie(const std::string& prompt, int n, float tie) {
    engine::ContextOptions o;
    o.n_slots = 1;
    o.slot_ctx = 1024;
    o.n_threads = 2;
    auto ctx = std::move(engine::Context::Create(*model_, o)).value();
    engine::Tokenizer tok(*model_);
    auto logits = engine::testing::Prefill(*ctx, 0, tok.Tokenize(prompt, true).tokens);
    EXPECT_TRUE(logits.ok());
    auto run = engine::testing::GreedyDecodeWithGaps(*ctx, 0, *logits, n);
    EXPECT_TRUE(run.ok());
    SureText sure;
    for (size_t i = 0; i < run->tokens.size() && run->top2_gap[i] >= tie; ++i) {
      if (tok.IsEndOfGeneration(run->tokens[i])) break;
      sure.text += tok.Piece(run->tokens[i]);
      ++sure.tokens;
    }
    return sure;
  }

  // Two replies to `prompt` (n tokens each) computed in different batch
  // shapes or slots: equal on the CPU (its kernels are batch-invariant with
  // the default q4_0 slots, docs/engine.md "Exactness"); on a GPU, whose
  // kernels are not, equal up to the first near-tie (both start with
  // GreedyTextBeforeNearTie's text), as bench/oracle.py compares them.
  void ExpectSameReply(const std::string& got, const std::string& want, const std::string& prompt, int n) {
    if (model_->info().n_gpu_layers == 0) {
      EXPECT_EQ(got, want);
      return;
    }
    const SureText sure = GreedyTextBeforeNearTie(prompt, n, kTie);
    EXPECT_EQ(got.substr(0, sure.text.size()), sure.text) << "vs " << want;
    EXPECT_EQ(want.substr(0, sure.text.size()), sure.text);
  }

  // A file system for the store that lives until after TearDown's shutdown
  // (the last saves run then).
  template <typename T, typename... Args>
  T* MakeFileSystem(Args&&... args) {
    auto fs = std::make_unique<T>(std::forward<Args>(args)...);
    T* raw = fs.get();
    file_systems_.push_back(std::move(fs));
    return raw;
  }

  // A file system whose block file reads take 25 ms each (the manifest's do
  // not), so that a read is still running when its manifest is in, as a
  // disk's is (on this VM's page cache a read ends before its turn could
  // start: pipelined restores).
  FileSystem* SlowBlockReads() {
    auto* slow = MakeFileSystem<store_test::HookedFileSystem>(DefaultFileSystem(), /*concurrent=*/true);
    slow->read_hook = [](const std::string& path, uint64_t, size_t) {
      if (path.find("/blocks/") != std::string::npos) std::this_thread::sleep_for(std::chrono::milliseconds(25));
      return Status::OK();
    };
    return slow;
  }

  static engine::Model* model_;
  std::vector<std::unique_ptr<FileSystem>> file_systems_;
  uint64_t forbidden_at_start_ = 0;
  std::filesystem::path dir_;
  std::unique_ptr<engine::Context> ctx_;
  std::unique_ptr<AgentStore> store_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<Scheduler> sched_;
};
inline engine::Model* SchedulerTest::model_ = nullptr;

inline std::string Prompt(int i) {
  return engine::testing::SampleText(4000).substr(static_cast<size_t>(i) * 700, 300 + 60 * i);
}

}  // namespace agentkv::sched
