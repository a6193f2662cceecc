#include "api/auth.h"

#include <algorithm>
#include <cctype>

#include "api/identity.h"
#include "util/hash.h"

namespace agentkv::api {
namespace {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Compare digests so that the time does not depend on lengths or contents.
  const std::string da = Sha256Hex(a);
  const std::string db = Sha256Hex(b);
  unsigned diff = 0;
  for (size_t i = 0; i < da.size(); ++i) diff |= static_cast<unsigned char>(da[i] ^ db[i]);
  return diff == 0;
}

}  // namespace

Result<ApiKeys> ApiKeys::Parse(const std::vector<std::string>& specs) {
  ApiKeys keys;
  for (const std::string& spec : specs) {
    Entry e;
    const size_t colon = spec.find(':');
    if (colon == std::string::npos) {
      e.key = spec;
      e.namespace_id = "key-" + Sha256Hex(spec).substr(0, 16);
    } else {
      e.namespace_id = spec.substr(0, colon);
      e.key = spec.substr(colon + 1);
      AGENTKV_RETURN_IF_ERROR(ValidateNamespace(e.namespace_id).WithContext("api key"));
    }
    if (e.key.empty()) return Status::InvalidArgument("api key: empty key");
    for (const Entry& other : keys.entries_) {
      if (other.key == e.key) return Status::InvalidArgument("api key: the same key given twice");
    }
    keys.entries_.push_back(std::move(e));
  }
  return keys;
}

Result<std::string> ApiKeys::Authenticate(std::string_view authorization) const {
  if (entries_.empty()) return std::string(kDefaultNamespace);
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.empty()) {
    return Status::InvalidArgument(
        "You didn't provide an API key. Send it as 'Authorization: Bearer KEY'.");
  }
  if (authorization.size() <= kBearer.size() ||
      !std::equal(kBearer.begin(), kBearer.end(), authorization.begin(),
                  [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
    return Status::InvalidArgument("Malformed Authorization header; expected 'Bearer KEY'.");
  }
  std::string_view key = authorization.substr(kBearer.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  const std::string* found = nullptr;
  for (const Entry& e : entries_) {  // no early exit: same work for every key
    if (ConstantTimeEquals(e.key, key) && found == nullptr) found = &e.namespace_id;
  }
  if (found == nullptr) return Status::InvalidArgument("Incorrect API key provided.");
  return *found;
}

}  // namespace agentkv::api
