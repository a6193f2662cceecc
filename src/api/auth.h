#pragma once
// API keys -> namespaces.
//
// Each configured key is its own tenant. A key spec is either
//   KEY           namespace = "key-" + first 16 hex digits of SHA-256(KEY)
//                 (stable across restarts, reveals nothing about the key), or
//   NAME:KEY      namespace = NAME (validated like an agent id).
//   NAME:KEY:isolated
//                 the key is its own trust domain: its agents live in a
//                 namespace of their own, IsolatedNamespace(NAME, KEY), so
//                 no other key (of NAME or not) can match, continue, fork,
//                 list or delete them, whatever identified them (explicit
//                 id, session header or implicit), nor can it see other
//                 keys' agents; and its requests are isolated
//                 (GenerationRequest::isolated): without an agent id they
//                 never continue or fork any conversation, not even the
//                 key's own, so usage.cached_tokens cannot probe the texts
//                 of other clients sharing the key. NAME is then at most
//                 kMaxIsolatedNameBytes long.
// A spec containing ':' is always read as NAME:KEY (a KEY ending in
// ":isolated" is read as the attribute). No NAME may contain
// kIsolatedMarker (reserved for isolated keys' namespaces). With no keys
// configured, every request is accepted and lands in namespace "default".
//
// The admin key (optional, --admin-key) guards server-wide routes (/metrics):
// configured, only it opens them; not configured, they are open without
// tenant keys and closed (403) with them, since server-wide counters tell
// one tenant about the others' traffic.
//
// Thread safety: immutable after construction; Authenticate is const.

#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace agentkv::api {

constexpr const char* kDefaultNamespace = "default";

// An isolated key's namespace is NAME + kIsolatedMarker + 16 hex digits of
// SHA-256("agentkv isolated key\n" + KEY): stable across restarts (it is the
// namespace its agents' manifests and files are stored under, and the
// remote tier's keys), one per key (rotating the key leaves its agents
// behind), and it reveals nothing about the key. A configured NAME
// containing the marker is refused, so no key's namespace can be another's.
constexpr std::string_view kIsolatedMarker = ".isolated-";
constexpr size_t kIsolatedHashChars = 16;
// 128 (the namespace rule, util/names.h) minus the marker and the hash.
constexpr size_t kMaxIsolatedNameBytes = 128 - kIsolatedMarker.size() - kIsolatedHashChars;
std::string IsolatedNamespace(std::string_view name, std::string_view key);

class ApiKeys {
 public:
  ApiKeys() = default;  // no keys: open server

  // Parses specs (see above). InvalidArgument for an empty key, a bad NAME,
  // two specs with the same key, or an admin key equal to a tenant key.
  // `admin_key` "" = none.
  static Result<ApiKeys> Parse(const std::vector<std::string>& specs, std::string admin_key = "");

  bool enabled() const { return !entries_.empty(); }

  enum class AdminAccess { kGranted, kBadKey, kDisabled };
  // For server-wide routes: kGranted (no keys at all, or the admin key sent),
  // kBadKey (an admin key is configured and was not sent: 401), kDisabled
  // (tenant keys but no admin key configured: 403).
  AdminAccess AuthenticateAdmin(std::string_view authorization) const;

  // `authorization` is the raw Authorization header ("" if absent).
  // Returns the namespace, or InvalidArgument("...") for a missing, malformed
  // or unknown key (the caller answers 401). Key comparison takes time
  // independent of where the keys differ.
  Result<std::string> Authenticate(std::string_view authorization) const;

  struct Tenant {
    std::string namespace_id;  // of an isolated key: IsolatedNamespace(NAME, KEY)
    bool isolated = false;     // NAME:KEY:isolated
  };
  // As Authenticate, with the key's attributes.
  Result<Tenant> AuthenticateTenant(std::string_view authorization) const;

 private:
  struct Entry {
    std::string key;
    std::string namespace_id;
    bool isolated = false;
  };
  std::vector<Entry> entries_;
  std::string admin_key_;
};

}  // namespace agentkv::api
