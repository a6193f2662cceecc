#include "remote/remote_admin.h"

#include <algorithm>
#include <tuple>

#include "remote/remote_tier.h"
#include "store/manifest.h"

namespace agentkv {

Result<RemoteListing> RemoteCacheList(RemoteStore* store, const std::string& ns, const std::string& agent_id) {
  auto all = store->ListManifests(RemoteScope{"", ns});
  if (!all.ok()) return all.status();
  RemoteListing out;
  for (const auto& m : *all) {
    auto rec = DecodeManifest(m.bytes);
    if (!rec.ok()) {
      out.problems.push_back("manifest (version " + std::to_string(m.version) + "): " + rec.status().ToString());
      continue;
    }
    if (rec->version != m.version) {
      out.problems.push_back("agent " + rec->agent_id + ": manifest version differs from its entry's");
      continue;
    }
    if ((!ns.empty() && rec->ns != ns) || (!agent_id.empty() && rec->agent_id != agent_id)) continue;
    out.agents.push_back({std::move(rec).value(), m.bytes.size()});
  }
  std::sort(out.agents.begin(), out.agents.end(), [](const RemoteAgentRow& a, const RemoteAgentRow& b) {
    return std::tie(a.record.fingerprint, a.record.ns, a.record.agent_id) <
           std::tie(b.record.fingerprint, b.record.ns, b.record.agent_id);
  });
  return out;
}

Result<std::vector<VerifyReport>> RemoteCacheVerify(RemoteStore* store, const std::string& ns,
                                                    const std::string& agent_id) {
  auto listing = RemoteCacheList(store, ns, agent_id);
  if (!listing.ok()) return listing.status();
  std::vector<VerifyReport> out;
  for (const auto& p : listing->problems) {
    VerifyReport r;
    r.problems.push_back(p);
    out.push_back(std::move(r));
  }
  for (const auto& row : listing->agents) {
    const AgentRecord& rec = row.record;
    VerifyReport r;
    r.ns = rec.ns;
    r.agent_id = rec.agent_id;
    r.n_tokens = static_cast<uint32_t>(rec.tokens.size());
    r.n_blocks = static_cast<uint32_t>(rec.blocks.size());
    std::vector<std::string> ids;
    for (const auto& b : rec.blocks) ids.push_back(b.id);
    auto blocks = store->GetBlocks(RemoteScope{rec.fingerprint, rec.ns}, ids);
    if (!blocks.ok()) return blocks.status();
    bool prefix = true;
    for (uint32_t i = 0; i < ids.size(); ++i) {
      auto dec = VerifyRemoteBlock((*blocks)[i], rec, i, rec.fingerprint);
      if (dec.ok()) {
        ++r.n_ok;
        if (prefix) r.valid_tokens += rec.blocks[i].n_tokens;
        continue;
      }
      prefix = false;
      dec.status().code() == StatusCode::kNotFound ? ++r.n_missing : ++r.n_corrupt;
      r.problems.push_back("block " + std::to_string(i) + " (" + ids[i] + "): " + dec.status().ToString());
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace agentkv
