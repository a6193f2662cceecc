// The scheduler on architectures other than the bundled model's (random
// weights at small shapes, synth/): what only shows end to end.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "sched/scheduler_fixture.h"
#include "synth/synth_model.h"

namespace agentkv::sched {
namespace {

// A hybrid sliding-window model (tiny-gemma3: windowed and full-attention
// layers, two KV caches in llama.cpp).
class SlidingWindowSchedulerTest : public SchedulerTest {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                      ("agentkv_sched_arch_" + std::to_string(::getpid()) + "_gemma3.gguf"));
    synth::SynthOptions so;
    so.preset = "tiny-gemma3";
    so.output_path = path_->string();
    so.seed = 7;
    ASSERT_TRUE(synth::WriteSynthModel(so).ok());
    auto model = engine::Model::Load(path_->string());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    std::filesystem::remove(*path_);
    delete path_;
  }
  static std::filesystem::path* path_;
};
std::filesystem::path* SlidingWindowSchedulerTest::path_ = nullptr;

// The pipelined restore imports one KV cache (engine::LayerGatedImport::
// Supports) and the read landing plans none of a sliding-window layout:
// asked for on a model with two caches, neither is used, and a returning
// agent after a restart (its block reads slowed, as for the pipelined tests)
// restores warm from its blocks and answers as a cold prefill does, up to
// the first near-tie (the batch shapes differ).
TEST_F(SlidingWindowSchedulerTest, APipelinedRestoreIsDeclinedAndTheAgentStillRestoresWarm) {
  ASSERT_NE(model_, nullptr);
  SchedulerOptions piped;
  piped.pipelined_restore = true;
  FileSystem* slow = SlowBlockReads();  // else the read ends before the turn could start
  const std::string a = engine::testing::SampleText(4000).substr(0, 2400);
  Boot(1, 64u << 20, piped, 1024, slow);
  auto a1 = Run("a", a, 8);
  sched_->FlushSaves();
  const std::string a_next = a + a1->text() + " And";
  Boot(1, 64u << 20, piped, 1024, slow);  // restart: only the disk remains
  auto a2 = Run("a", a_next, 16);
  EXPECT_EQ(a2->usage().cache_state, api::CacheState::kWarm);
  EXPECT_GT(a2->usage().cached_tokens, a1->usage().prompt_tokens - 1);
  EXPECT_EQ(Metric("agentkv_restores_pipelined_total"), 0);
  const SureText sure = GreedyTextBeforeNearTie(a_next, 16, kTie);
  EXPECT_EQ(a2->text().substr(0, sure.text.size()), sure.text);
}

}  // namespace
}  // namespace agentkv::sched
