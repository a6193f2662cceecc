#include "util/names.h"

#include <string>

namespace agentkv {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

// An excerpt for error messages: client bytes are not echoed raw.
std::string Excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) out.push_back(IsNameChar(c) ? c : '?');
  if (s.size() > 64) out += "...";
  return out;
}

}  // namespace

Status ValidateName(std::string_view what, std::string_view name) {
  const std::string prefix = std::string(what) + ": ";
  if (name.empty()) return Status::InvalidArgument(prefix + "must not be empty");
  if (name.size() > kMaxNameBytes) return Status::InvalidArgument(prefix + "longer than 128 characters");
  for (char c : name) {
    if (!IsNameChar(c)) {
      return Status::InvalidArgument(prefix + "'" + Excerpt(name) + "' may only contain A-Z a-z 0-9 . _ -");
    }
  }
  if (name.front() == '.') return Status::InvalidArgument(prefix + "'" + Excerpt(name) + "' must not start with '.'");
  return Status::OK();
}

}  // namespace agentkv
