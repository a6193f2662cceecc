#pragma once
// A real redis-server for tests: started on a free loopback port in a temp
// directory, nothing persisted, stopped (SIGTERM, then SIGKILL) on
// destruction. Tests call Available() first and GTEST_SKIP if redis-server is
// not installed.

#include <hiredis/hiredis.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace agentkv::remote_test {

inline std::string RedisServerPath() {
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t n = sizeof a;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

class RedisTestServer {
 public:
  static bool Available() { return !RedisServerPath().empty(); }

  // password: requirepass ("" none).
  explicit RedisTestServer(std::string password = "") : password_(std::move(password)), port_(FreePort()) {}
  ~RedisTestServer() { Stop(); }

  // Starts (or restarts, on the same port) and waits until it answers PING.
  bool Start() {
    std::vector<std::string> args = {RedisServerPath(), "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--daemonize", "no",
                                     "--dir", "/tmp", "--loglevel", "warning", "--logfile", ""};
    if (!password_.empty()) {
      args.push_back("--requirepass");
      args.push_back(password_);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return false;
    for (int i = 0; i < 200; ++i) {
      if (Ping()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // Runs one command (tests poke at keys directly). Caller frees the reply.
  redisReply* Command(const std::vector<std::string>& args) {
    redisContext* c = redisConnect("127.0.0.1", port_);
    if (c == nullptr || c->err) {
      if (c) redisFree(c);
      return nullptr;
    }
    if (!password_.empty()) freeReplyObject(redisCommand(c, "AUTH %s", password_.c_str()));
    std::vector<const char*> p;
    std::vector<size_t> n;
    for (const auto& a : args) {
      p.push_back(a.data());
      n.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(p.size()), p.data(), n.data()));
    redisFree(c);
    return r;
  }

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  bool Ping() {
    redisReply* r = Command({"PING"});
    const bool ok = r != nullptr && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
  }

  std::string password_;
  int port_;
  pid_t pid_ = -1;
};

}  // namespace agentkv::remote_test
