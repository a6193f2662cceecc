// agentkv demo: the main job. Starts the server in-process on the bundled
// model with a temporary cache dir, runs a three-agent, three-turn
// conversation through the HTTP API, restarts the server, runs one more turn
// per agent, and prints what the cache did for each turn.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <cpp-httplib/httplib.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/server_flags.h"
#include "cli/server_stack.h"

namespace agentkv::cli {
namespace {

using nlohmann::json;

constexpr const char* kUsage =
    "usage: agentkv demo [-m MODEL] [--turns 3] [-n TOKENS] [--doc-bytes 4000] [-t THREADS] [--keep-cache DIR]\n"
    "Each agent's system prompt carries its own document (held-out Brown text, --doc-bytes long),\n"
    "so cold turns pay a real prefill and returning turns show what the cache saves.\n"
    "Default model: models/tiny-llama-brown-16m-q8_0.gguf (next to the binary's source tree).\n";

struct Agent {
  std::string id;
  json messages = json::array();
};

struct Row {
  std::string agent;
  std::string turn;
  std::string state, match;
  int64_t prompt = 0, reused = 0, prefilled = 0;
  double ttft_ms = 0;
};

const char* kUserLines[] = {
    "Outline the plan for the new city budget.",
    "What did the committee say about the schools?",
    "Summarize the argument in two sentences.",
    "Which of these points is the weakest?",
};

Result<Row> Turn(httplib::Client& client, Agent& agent, const std::string& turn_label, const std::string& user,
                 int max_tokens) {
  agent.messages.push_back({{"role", "user"}, {"content", user}});
  json body = {{"model", "agentkv"}, {"messages", agent.messages}, {"max_tokens", max_tokens}, {"temperature", 0}};
  httplib::Headers headers = {{"X-Agent-Id", agent.id}};
  auto res = client.Post("/v1/chat/completions", headers, body.dump(), "application/json");
  if (!res) return Status::Unavailable("demo: no response from the server");
  if (res->status != 200) return Status::Internal("demo: HTTP " + std::to_string(res->status) + ": " + res->body);
  json reply = json::parse(res->body, nullptr, false);
  if (reply.is_discarded()) return Status::Internal("demo: bad JSON from the server");
  const std::string content = reply["choices"][0]["message"]["content"].get<std::string>();
  agent.messages.push_back({{"role", "assistant"}, {"content", content}});
  const json& u = reply["usage"];
  Row row;
  row.agent = agent.id;
  row.turn = turn_label;
  row.state = u["agentkv"]["cache_state"].get<std::string>();
  row.match = u["agentkv"]["match"].get<std::string>();
  row.prompt = u["prompt_tokens"].get<int64_t>();
  row.reused = u["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  row.prefilled = u["agentkv"]["tokens_prefilled"].get<int64_t>();
  row.ttft_ms = u["agentkv"]["ttft_ms"].get<double>();
  return row;
}

// A slice of the held-out corpus next to the model, or "" if absent.
std::string Document(const std::string& model_path, size_t offset, size_t bytes) {
  const auto path = std::filesystem::path(model_path).parent_path() / "brown_test.txt";
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (offset >= text.size()) return "";
  return text.substr(offset, bytes);
}

std::string DefaultModel() {
  // Works from the repo root and from build/.
  for (const char* p : {"models/tiny-llama-brown-16m-q8_0.gguf", "../models/tiny-llama-brown-16m-q8_0.gguf"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "models/tiny-llama-brown-16m-q8_0.gguf";
}

}  // namespace

int CmdDemo(int argc, char** argv) {
  Flags flags(argc, argv, kServerBooleanFlags);
  if (flags.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  ServerConfig config;
  std::string err;
  long long turns = 3, n = 24, doc_bytes = 4000;
  if (!ParseServerConfig(flags, &config, &err, false, {"turns", "n", "keep-cache", "doc-bytes"}) ||
      !flags.GetInt("doc-bytes", "", 4000, &doc_bytes, &err) || doc_bytes < 0 ||
      !flags.GetInt("turns", "", 3, &turns, &err) || !flags.GetInt("n", "n", 24, &n, &err) || turns < 1 ||
      turns > 4) {
    std::fprintf(stderr, "agentkv demo: %s\n%s", err.empty() ? "--turns must be 1..4" : err.c_str(), kUsage);
    return 2;
  }
  if (config.model_path.empty()) config.model_path = DefaultModel();
  config.port = 0;
  config.n_slots = 2;  // fewer slots than agents: turns also exercise the RAM pool (hot)
  config.quiet = true;
  const auto keep = flags.Get("keep-cache");
  const std::filesystem::path dir = keep ? std::filesystem::path(*keep)
                                         : std::filesystem::temp_directory_path() /
                                               ("agentkv-demo-" + std::to_string(::getpid()));
  config.cache_dir = dir.string();

  std::vector<Agent> agents = {{"planner", {}}, {"coder", {}}, {"reviewer", {}}};
  const char* roles[] = {"You are the planner of a small city council team. Keep answers short.",
                         "You are the coder. You write precise, careful answers.",
                         "You are the reviewer. You point out what is missing."};
  for (size_t i = 0; i < agents.size(); ++i) {
    std::string system = roles[i];
    const std::string doc = Document(config.model_path, 20000 * (i + 1), static_cast<size_t>(doc_bytes));
    if (!doc.empty()) system += "\n\nBriefing document:\n" + doc;
    agents[i].messages.push_back({{"role", "system"}, {"content", system}});
  }

  std::vector<Row> rows;
  auto run_round = [&](ServerStack& stack, const std::string& label, int user_line) -> Status {
    httplib::Client client("127.0.0.1", stack.port());
    client.set_read_timeout(600);
    for (auto& a : agents) {
      AGENTKV_ASSIGN_OR_RETURN(Row row, Turn(client, a, label, kUserLines[user_line], static_cast<int>(n)));
      rows.push_back(row);
    }
    return Status::OK();
  };
  std::printf("agentkv demo: model %s, cache %s\n", config.model_path.c_str(), config.cache_dir.c_str());
  {
    auto stack = ServerStack::Start(config);
    if (!stack.ok()) {
      std::fprintf(stderr, "agentkv demo: %s\n", stack.status().ToString().c_str());
      return 1;
    }
    for (int t = 0; t < turns; ++t) {
      if (Status s = run_round(**stack, std::to_string(t + 1), t); !s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
    }
    (*stack)->Stop();  // graceful: flushes every pending save
  }
  std::printf("(server restarted: RAM and slots are empty, the disk cache remains)\n");
  {
    auto stack = ServerStack::Start(config);
    if (!stack.ok()) {
      std::fprintf(stderr, "agentkv demo: %s\n", stack.status().ToString().c_str());
      return 1;
    }
    if (Status s = run_round(**stack, std::to_string(turns + 1) + " (after restart)", static_cast<int>(turns) % 4);
        !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("\n%-9s %-19s %-9s %-7s %7s %7s %9s %10s\n", "agent", "turn", "cache", "match", "prompt", "reused",
              "prefilled", "TTFT ms");
  for (const auto& r : rows) {
    std::printf("%-9s %-19s %-9s %-7s %7lld %7lld %9lld %10.1f\n", r.agent.c_str(), r.turn.c_str(), r.state.c_str(),
                r.match.c_str(), static_cast<long long>(r.prompt), static_cast<long long>(r.reused),
                static_cast<long long>(r.prefilled), r.ttft_ms);
  }
  if (!keep) std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace agentkv::cli
