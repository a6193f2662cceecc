#include "api/identity.h"

namespace agentkv::api {
namespace {

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// A printable excerpt for error messages: client bytes are not echoed raw.
std::string Excerpt(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) out.push_back(IsIdChar(c) ? c : '?');
  if (s.size() > 64) out += "...";
  return out;
}

}  // namespace

Status ValidateAgentId(std::string_view id, std::string_view what) {
  const std::string name(what);
  if (id.empty()) return Status::InvalidArgument(name + ": must not be empty");
  if (id.size() > kMaxAgentIdBytes) {
    return Status::InvalidArgument(name + ": longer than 128 characters");
  }
  for (char c : id) {
    if (!IsIdChar(c)) {
      return Status::InvalidArgument(name + ": '" + Excerpt(id) +
                                     "' may only contain A-Z a-z 0-9 . _ -");
    }
  }
  if (id.front() == '.') {
    return Status::InvalidArgument(name + ": '" + Excerpt(id) + "' must not start with '.'");
  }
  return Status::OK();
}

}  // namespace agentkv::api
