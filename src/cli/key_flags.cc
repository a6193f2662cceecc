#include "cli/key_flags.h"

#include <fstream>

namespace agentkv::cli {
namespace {

std::string Trim(const std::string& s) {
  constexpr const char* kSpace = " \t\r\n";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// Appends the comma-separated keys of `value`; false on an empty item.
bool AppendKeys(const std::string& value, const std::string& source, std::vector<std::string>* keys,
                std::string* error) {
  for (const std::string& item : SplitCommaList(value)) {
    std::string key = Trim(item);
    if (key.empty()) {
      *error = source + ": an empty API key (in '" + value + "'); give each key, or leave the flag out";
      return false;
    }
    keys->push_back(std::move(key));
  }
  return true;
}

}  // namespace

bool ParseKeyFlags(const Flags& flags, std::vector<std::string>* api_keys, std::string* admin_key,
                   std::string* error) {
  for (const std::string& value : flags.GetAll("api-key")) {
    if (!AppendKeys(value, "--api-key (or AGENTKV_API_KEY)", api_keys, error)) return false;
  }
  if (auto f = flags.Get("api-key-file")) {
    std::ifstream in(*f);
    if (!in) {
      *error = "--api-key-file: cannot read " + *f;
      return false;
    }
    size_t n_keys = 0;
    std::string line;
    while (std::getline(in, line)) {
      if (Trim(line).empty()) continue;
      const size_t before = api_keys->size();
      if (!AppendKeys(line, "--api-key-file " + *f, api_keys, error)) return false;
      n_keys += api_keys->size() - before;
    }
    if (n_keys == 0) {
      *error = "--api-key-file: " + *f + " holds no key";
      return false;
    }
  }
  if (auto a = flags.Get("admin-key")) {
    std::string key = Trim(*a);
    if (key.empty()) {
      *error = "--admin-key (or AGENTKV_ADMIN_KEY) is empty; give a key, or leave it out";
      return false;
    }
    *admin_key = std::move(key);
  }
  return true;
}

}  // namespace agentkv::cli
