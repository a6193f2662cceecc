// The recorded requests of the real coding agents (tests/fixtures/clients,
// written by tests/e2e-clients) through our parsers and the bundled model's
// chat template: each main-conversation request of a session must render to
// a prompt that starts with the previous main request's prompt, so that the
// agent's cache EXTENDS (a DIVERGE there costs the whole conversation after
// the first difference). Whether the client echoed agentkv's reply verbatim
// (prompt + reply_text is a prefix of the next prompt) is printed. A second
// session of the same client (its recorded first turn, in session2/) must
// render with the same system text and tools as the first, so that it can
// start from the first session's cache (a prefix donor).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/anthropic_json.h"
#include "api/openai_json.h"
#include "api/responses_json.h"
#include "engine/chat_format.h"
#include "engine/model.h"
#include "engine/test_support.h"
#include "engine/tokenizer.h"
#include "sched/chat_request.h"
#include "sched/side_request.h"

namespace agentkv::api {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json ReadJson(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// The request of a fixture, parsed by the route's own parser; "" on success, else the error.
std::string Parse(const json& fixture, GenerationRequest* out) {
  ParseContext ctx;
  ctx.model_id = "tiny-llama-brown-16m-q8_0";
  const std::string body = fixture.at("body").dump();
  const std::string api = fixture.at("api");
  std::optional<ApiError> err;
  if (api == "anthropic") {
    std::string model;
    err = ParseMessagesRequest(body, ctx, out, &model);
  } else if (api == "responses") {
    ResponsesMeta meta;
    err = ParseResponsesRequest(body, ctx, out, &meta);
  } else {
    err = ParseChatRequest(body, ctx, out);
  }
  return err ? err->message : "";
}

// The fixture files of one session's directory, in the order they were sent (turnN-SEQ).
std::vector<fs::path> SessionFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() == ".json") files.push_back(f.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Each client's first session; with `second_sessions`, its session2/ too.
std::vector<std::vector<fs::path>> ClientSessions(bool second_sessions = false) {
  const fs::path root = fs::path(AGENTKV_SOURCE_DIR) / "tests" / "fixtures" / "clients";
  std::vector<std::vector<fs::path>> sessions;
  if (!fs::is_directory(root)) return sessions;
  for (const auto& dir : fs::directory_iterator(root)) {
    if (!dir.is_directory()) continue;
    sessions.push_back(SessionFiles(dir.path()));
    if (second_sessions && fs::is_directory(dir.path() / "session2")) {
      sessions.push_back(SessionFiles(dir.path() / "session2"));
    }
  }
  return sessions;
}

size_t CommonPrefix(const std::string& a, const std::string& b) {
  return std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin()).first - a.begin();
}

class ClientFixturesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = engine::Model::Load(engine::testing::BundledModelPath());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(m).value().release();
    tokenizer_ = new engine::Tokenizer(*model_);
    format_ = engine::ChatFormat::Create(*model_, *tokenizer_).release();
  }
  static void TearDownTestSuite() {
    delete format_;
    delete tokenizer_;
    delete model_;
  }
  static inline engine::Model* model_ = nullptr;
  static inline engine::Tokenizer* tokenizer_ = nullptr;
  static inline engine::ChatFormat* format_ = nullptr;
};

TEST_F(ClientFixturesTest, MainTurnsRenderAsPrefixExtensions) {
  int clients = 0;
  for (const std::vector<fs::path>& files : ClientSessions()) {
    ++clients;
    std::string prev_prompt, prev_reply;
    int mains = 0;
    for (const fs::path& file : files) {
      const json fixture = ReadJson(file);
      GenerationRequest request;
      const std::string err = Parse(fixture, &request);
      ASSERT_EQ(err, "") << file;
      if (fixture.at("kind") != "main") continue;
      Result<engine::ChatPrompt> prompt = format_->Render(sched::ToChatRequest(request));
      ASSERT_TRUE(prompt.ok()) << file << ": " << prompt.status().ToString();
      const std::string& text = prompt.value().rendered.text;
      if (mains++ > 0) {
        const size_t common = CommonPrefix(prev_prompt, text);
        EXPECT_EQ(common, prev_prompt.size())
            << file << ": the previous prompt is not a prefix; they differ at byte " << common << ": ..."
            << prev_prompt.substr(common, 80) << "... vs ..." << text.substr(common, 80) << "...";
        const std::string echoed = prev_prompt + prev_reply;
        const size_t with_reply = CommonPrefix(echoed, text);
        std::cout << file.filename().string() << ": prompt extends the previous one; the reply echoed "
                  << (with_reply == echoed.size() ? "verbatim" : "from byte " + std::to_string(with_reply - prev_prompt.size()) + " on differently")
                  << "\n";
      }
      prev_prompt = text;
      prev_reply = fixture.value("reply_text", "");
    }
    EXPECT_GE(mains, 2) << files.front().parent_path() << ": fewer than 2 main requests";
  }
  EXPECT_GE(clients, 1);
}

// Each session replayed through the scheduler's side-request decision
// (sched/side_request.h), with each agent's cache taken as its last prompt
// and the reply agentkv streamed: every main request of the session runs as
// the session's agent, and that agent ends up holding the real conversation
// (OpenCode sends its title request first: it must not keep the main role).
TEST_F(ClientFixturesTest, TheRealConversationIsTheSessionsMainAgent) {
  int sessions = 0;
  for (const std::vector<fs::path>& files : ClientSessions(/*second_sessions=*/true)) {
    ++sessions;
    const std::string session = "session";
    std::map<std::string, std::string> cached;  // agent id -> its cached text
    std::map<std::string, size_t> heads;        // agent id -> its last prompt's head bytes
    std::string last_main;
    for (const fs::path& file : files) {
      const json fixture = ReadJson(file);
      GenerationRequest request;
      ASSERT_EQ(Parse(fixture, &request), "") << file;
      const engine::ChatRequest chat = sched::ToChatRequest(request);
      Result<engine::ChatPrompt> prompt = format_->Render(chat);
      ASSERT_TRUE(prompt.ok()) << file << ": " << prompt.status().ToString();
      const std::string& text = prompt.value().rendered.text;
      const size_t head = sched::HeadBytes(*format_, chat, text);
      const sched::SideDecision d =
          sched::ClassifyRequest({cached[session], text, head, heads[session], request.sampling.max_tokens.value_or(256)});
      const bool main = fixture.at("kind") == "main";
      if (main) {
        EXPECT_EQ(d.kind, sched::SideKind::kMain) << file << ": " << sched::SideKindName(d.kind);
        last_main = text;
      }
      const std::string agent =
          d.kind == sched::SideKind::kMain ? session : sched::SideAgentId(session, std::string_view(text).substr(0, head));
      cached[agent] = text + fixture.value("reply_text", "");
      heads[agent] = head;
    }
    EXPECT_TRUE(cached[session].starts_with(last_main)) << files.front().parent_path();
  }
  EXPECT_GE(sessions, 6);  // 3 clients, 2 sessions each
}

// The first main request of the second session (a new session id, another
// task) against the first session's: the rendered system text and tools
// (sched::HeadBytes) are the same bytes, so the second session's new agent
// starts from the first session's cache (docs/api.md "Shared prefixes").
// Claude Code's billing line differs between the two (cc_version's suffix):
// it must not reach the rendered text.
TEST_F(ClientFixturesTest, SecondSessionRendersTheSameSystemTextAndTools) {
  const fs::path root = fs::path(AGENTKV_SOURCE_DIR) / "tests" / "fixtures" / "clients";
  int clients = 0;
  for (const auto& dir : fs::directory_iterator(root)) {
    const fs::path second = dir.path() / "session2";
    if (!fs::is_directory(second)) continue;
    ++clients;
    // The first main request of the session in `d` (files turnN-SEQ sort in the order sent).
    auto first_main = [](const fs::path& d) {
      for (const fs::path& f : SessionFiles(d)) {
        if (ReadJson(f).at("kind") == "main") return f;
      }
      return fs::path();
    };
    std::string text[2];
    size_t head[2] = {0, 0};
    const fs::path files[2] = {first_main(dir.path()), first_main(second)};
    for (int s = 0; s < 2; ++s) {
      ASSERT_FALSE(files[s].empty()) << dir.path() << " session " << s + 1 << ": no main request";
      GenerationRequest request;
      ASSERT_EQ(Parse(ReadJson(files[s]), &request), "") << files[s];
      const engine::ChatRequest chat = sched::ToChatRequest(request);
      Result<engine::ChatPrompt> prompt = format_->Render(chat);
      ASSERT_TRUE(prompt.ok()) << files[s] << ": " << prompt.status().ToString();
      text[s] = prompt.value().rendered.text;
      head[s] = sched::HeadBytes(*format_, chat, text[s]);
    }
    ASSERT_GT(head[0], 0u) << files[0];
    EXPECT_EQ(head[1], head[0]) << files[1];
    const size_t common = CommonPrefix(text[0], text[1]);
    EXPECT_GE(common, head[0]) << files[1] << ": differs from session 1 inside the system text and tools, at byte "
                               << common << ": ..." << text[0].substr(common, 80) << "... vs ..."
                               << text[1].substr(common, 80) << "...";
    const size_t head_tokens = tokenizer_->Tokenize(std::string_view(text[0]).substr(0, head[0]), true).tokens.size();
    std::cout << dir.path().filename().string() << ": sessions 1 and 2 share " << common << " of "
              << text[1].size() << " rendered bytes; system text and tools: " << head[0] << " bytes, ~"
              << head_tokens << " tokens\n";
  }
  EXPECT_GE(clients, 3);
}

}  // namespace
}  // namespace agentkv::api
