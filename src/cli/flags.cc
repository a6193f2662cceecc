#include "cli/flags.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace agentkv::cli {

namespace {

// "-x", "--name", "--name=v": a flag; "-", "-1", "-0.5" and anything else: a value.
bool IsFlagToken(const std::string& a) {
  return a.size() > 1 && a[0] == '-' && !std::isdigit(static_cast<unsigned char>(a[1]));
}

}  // namespace

Flags::Flags(int argc, char** argv, const std::vector<std::string>& boolean_flags) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (IsFlagToken(a)) {
      std::string name = a.substr(a.find_first_not_of('-'));
      const auto eq = name.find('=');
      std::string value;
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
      } else if (std::find(boolean_flags.begin(), boolean_flags.end(), name) != boolean_flags.end()) {
        value = "1";
      } else if (i + 1 >= argc || IsFlagToken(argv[i + 1])) {
        // "--admin-key" last, or "--api-key --port 80": no value. Taking "1"
        // (or the next flag) as the value would start with a key nobody chose.
        if (error_.empty()) error_ = "--" + name + " needs a value (or --" + name + "=VALUE)";
        continue;
      } else {
        value = argv[++i];
      }
      values_[name] = value;
      all_values_.emplace_back(name, std::move(value));
    } else {
      positional_.push_back(a);
    }
  }
}

std::optional<std::string> Flags::Get(const std::string& long_name, const std::string& short_name) const {
  if (auto it = values_.find(long_name); it != values_.end()) return it->second;
  if (!short_name.empty()) {
    if (auto it = values_.find(short_name); it != values_.end()) return it->second;
  }
  std::string env = "AGENTKV_" + long_name;
  for (auto& c : env) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (const char* v = std::getenv(env.c_str())) return std::string(v);
  return std::nullopt;
}

std::string Flags::GetOr(const std::string& long_name, const std::string& short_name, const std::string& def) const {
  return Get(long_name, short_name).value_or(def);
}

bool Flags::Has(const std::string& long_name) const { return Get(long_name).has_value(); }

std::vector<std::string> Flags::GetAll(const std::string& long_name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : all_values_) {
    if (k == long_name) out.push_back(v);
  }
  if (out.empty()) {
    if (auto v = Get(long_name)) out.push_back(*v);
  }
  return out;
}

bool Flags::GetInt(const std::string& long_name, const std::string& short_name, long long def, long long* out,
                   std::string* error) const {
  auto v = Get(long_name, short_name);
  if (!v) {
    *out = def;
    return true;
  }
  char* end = nullptr;
  *out = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0') {
    *error = "--" + long_name + ": expected an integer, got '" + *v + "'";
    return false;
  }
  return true;
}

bool Flags::GetFloat(const std::string& long_name, const std::string& short_name, double def, double* out,
                     std::string* error) const {
  auto v = Get(long_name, short_name);
  if (!v) {
    *out = def;
    return true;
  }
  char* end = nullptr;
  *out = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0') {
    *error = "--" + long_name + ": expected a number, got '" + *v + "'";
    return false;
  }
  return true;
}

std::vector<std::string> Flags::Unknown(const std::vector<std::string>& known) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : values_) {
    if (std::find(known.begin(), known.end(), k) == known.end()) out.push_back(k);
  }
  return out;
}

std::vector<std::string> SplitCommaList(const std::string& value) {
  std::vector<std::string> items;
  for (size_t b = 0; b <= value.size();) {
    const size_t e = std::min(value.find(',', b), value.size());
    items.push_back(value.substr(b, e - b));
    b = e + 1;
  }
  return items;
}

}  // namespace agentkv::cli
