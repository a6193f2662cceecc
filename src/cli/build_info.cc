#include "cli/build_info.h"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "agentkv_git_commit.h"
#include "util/hash.h"

namespace agentkv::cli {
namespace {

std::string ReadFirstLine(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "";
}

long long RamBytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  long long kb = 0;
  while (f >> key >> kb) {
    if (key == "MemTotal:") return kb * 1024;
    f.ignore(1 << 10, '\n');
  }
  return 0;
}

std::string LocalIsoDate() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  return buf;
}

nlohmann::json BinaryIdentity() {
  nlohmann::json b;
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return b;
  path[n] = '\0';
  b["path"] = path;
  std::ifstream f(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << f.rdbuf();
  const std::string data = bytes.str();
  b["bytes"] = data.size();
  b["sha256"] = Sha256Hex(data);
  return b;
}

}  // namespace

std::string BuildCommit() { return AGENTKV_GIT_COMMIT; }
bool BuildDirty() { return AGENTKV_GIT_DIRTY != 0; }

nlohmann::json Provenance() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return {{"commit", BuildCommit()},
          {"dirty", BuildDirty()},
          {"date", LocalIsoDate()},
          {"hostname", host},
          {"cpu_model", CpuModel()},
          {"logical_cpus", std::thread::hardware_concurrency()},
          {"ram_bytes", RamBytes()},
          {"loadavg", ReadFirstLine("/proc/loadavg")},
          // Changes at every boot: runs with different boot_ids ran on different
          // (or rebooted) machines; bench/paired.py clusters by it.
          {"boot_id", ReadFirstLine("/proc/sys/kernel/random/boot_id")},
          {"binary", BinaryIdentity()}};
}

}  // namespace agentkv::cli
