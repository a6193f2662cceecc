#include "api/auth.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "util/names.h"
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

// The key of "Bearer KEY" (case-insensitive scheme, spaces trimmed), or
// nullopt when the header is not of that form.
std::optional<std::string_view> BearerKey(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() ||
      !std::equal(kBearer.begin(), kBearer.end(), authorization.begin(),
                  [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
    return std::nullopt;
  }
  std::string_view key = authorization.substr(kBearer.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  return key;
}

}  // namespace

std::string IsolatedNamespace(std::string_view name, std::string_view key) {
  std::string salted = "agentkv isolated key\n";
  salted.append(key);
  return std::string(name) + std::string(kIsolatedMarker) + Sha256Hex(salted).substr(0, kIsolatedHashChars);
}

Result<ApiKeys> ApiKeys::Parse(const std::vector<std::string>& specs, std::string admin_key) {
  ApiKeys keys;
  keys.admin_key_ = std::move(admin_key);
  for (const std::string& spec : specs) {
    Entry e;
    const size_t colon = spec.find(':');
    if (colon == std::string::npos) {
      e.key = spec;
      e.namespace_id = "key-" + Sha256Hex(spec).substr(0, 16);
    } else {
      e.namespace_id = spec.substr(0, colon);
      e.key = spec.substr(colon + 1);
      constexpr std::string_view kIsolated = ":isolated";
      if (e.key.ends_with(kIsolated)) {  // "NAME::isolated" leaves an empty key: refused below
        e.key.resize(e.key.size() - kIsolated.size());
        e.isolated = true;
      }
      AGENTKV_RETURN_IF_ERROR(ValidateName("namespace", e.namespace_id).WithContext("api key"));
      if (e.namespace_id.find(kIsolatedMarker) != std::string::npos) {
        return Status::InvalidArgument("api key: a NAME must not contain '" + std::string(kIsolatedMarker) +
                                       "' (reserved for isolated keys' namespaces)");
      }
      if (e.isolated && e.namespace_id.size() > kMaxIsolatedNameBytes) {
        return Status::InvalidArgument("api key: an isolated key's NAME is at most " +
                                       std::to_string(kMaxIsolatedNameBytes) + " characters");
      }
    }
    if (e.key.empty()) return Status::InvalidArgument("api key: empty key");
    if (e.isolated) e.namespace_id = IsolatedNamespace(e.namespace_id, e.key);
    for (const Entry& other : keys.entries_) {
      if (other.key == e.key) return Status::InvalidArgument("api key: the same key given twice");
    }
    if (!keys.admin_key_.empty() && e.key == keys.admin_key_) {
      return Status::InvalidArgument("api key: the admin key must differ from every tenant key");
    }
    keys.entries_.push_back(std::move(e));
  }
  return keys;
}

ApiKeys::AdminAccess ApiKeys::AuthenticateAdmin(std::string_view authorization) const {
  if (admin_key_.empty()) return entries_.empty() ? AdminAccess::kGranted : AdminAccess::kDisabled;
  std::optional<std::string_view> key = BearerKey(authorization);
  return key && ConstantTimeEquals(admin_key_, *key) ? AdminAccess::kGranted : AdminAccess::kBadKey;
}

Result<std::string> ApiKeys::Authenticate(std::string_view authorization) const {
  AGENTKV_ASSIGN_OR_RETURN(Tenant tenant, AuthenticateTenant(authorization));
  return tenant.namespace_id;
}

Result<ApiKeys::Tenant> ApiKeys::AuthenticateTenant(std::string_view authorization) const {
  if (entries_.empty()) return Tenant{std::string(kDefaultNamespace), false};
  if (authorization.empty()) {
    return Status::InvalidArgument(
        "You didn't provide an API key. Send it as 'Authorization: Bearer KEY'.");
  }
  std::optional<std::string_view> key = BearerKey(authorization);
  if (!key) return Status::InvalidArgument("Malformed Authorization header; expected 'Bearer KEY'.");
  const Entry* found = nullptr;
  for (const Entry& e : entries_) {  // no early exit: same work for every key
    if (ConstantTimeEquals(e.key, *key) && found == nullptr) found = &e;
  }
  if (found == nullptr) return Status::InvalidArgument("Incorrect API key provided.");
  return Tenant{found->namespace_id, found->isolated};
}

}  // namespace agentkv::api
