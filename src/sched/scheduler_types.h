#pragma once
// Internal types of the Scheduler (inference-thread state). Not part of the
// public interface; included by scheduler*.cc only.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/grammar.h"
#include "engine/layer_gated_import.h"
#include "sched/scheduler.h"
#include "store/agent_record.h"

namespace agentkv::sched {

using Clock = std::chrono::steady_clock;

// One agent known to this process. `seq` is the agent's cached sequence:
// while idle, exactly what its newest cache (slot, pool or disk) holds; during
// a turn, the tokens in its slot (text may run ahead by the unprocessed prompt).
struct Scheduler::Agent {
  AgentKey key;
  CachedSequence seq;
  int slot = -1;               // resident slot, -1 if none
  bool busy = false;           // a request is active for it
  bool on_disk = false;        // the store holds a manifest for it
  std::optional<AgentKey> fork_source;  // implicit fork: restore from this agent's blocks
  int64_t last_use_ms = 0;
  // Of its newest committed turn (AgentRecord::version; the store refuses to
  // go back to a lower one): max(previous + 1, commit time in Unix ms), so a
  // later commit has a higher version, across restarts too.
  uint64_t version = 0;
  // Created by a request of an isolated API key: never a candidate of another
  // request's implicit lookup, never a prefix donor. (Not kept in the
  // manifest: after a restart only the namespace, which is the key's own,
  // keeps other keys away from it.)
  bool isolated = false;
  // A side agent (sched/side_request.h): the main agent whose side requests
  // it serves. It gives up its slot before main agents do, and never takes
  // that main agent's slot while another can be had.
  std::optional<AgentKey> side_of;
  // Bytes of its last prompt that were the system text and tools
  // (HeadBytes), kept in its manifest (AgentRecord::head_bytes); 0: unknown
  // (a completion, or a manifest written before they were kept).
  size_t head_bytes = 0;
  // Bookkeeping of Reindex (scheduler_table.cc).
  bool indexed = false;         // in implicit_index_
  uint64_t accounted_bytes = 0;  // its share of table_bytes_
};

// An agent read from the store (or from `unsaved_`) by the read executor.
struct Scheduler::AgentRead {
  uint64_t id = 0;                      // which read (BeginAgentRead): a dropped one's result is discarded
  bool done = false;                    // false: in flight
  std::optional<AgentRecord> record;    // its manifest; empty: not on disk
  std::vector<PoolBlock> blocks;        // the longest valid prefix of its blocks
  bool from_disk = false;               // false: the blocks came from RAM (unsaved_)
  bool from_remote = false;             // some blocks came from the remote tier (and were written through)
  bool remote_manifest = false;         // the record is the remote tier's (newer than the local disk's)
  double read_ms = 0.0;                 // how long the read took
  std::shared_ptr<ReadLanding::Ticket> landing;  // from_disk: where its blocks landed, if they did
};

// A committed turn whose save has not landed yet (or failed): the newest
// state of the agent, kept so reads never see an older version on disk.
struct Scheduler::UnsavedTurn {
  struct Data {
    AgentRecord record;
    std::vector<PoolBlock> blocks;
  };
  std::shared_ptr<const Data> turn;  // shared with the save job (no copy of the record)
  uint64_t seq = 0;                  // which save owns it
};

// Where a turn restores its agent from (FindRestoreSource).
struct Scheduler::RestoreSource {
  api::CacheState state = api::CacheState::kCold;
  std::vector<PoolBlock> blocks;  // hot / warm
  double read_ms = 0.0;           // warm: the disk read's duration
  std::optional<AgentKey> read_key;  // its blocks are agent_reads_'s entry of this key (erased once admitted)
  std::shared_ptr<ReadLanding::Ticket> landing;  // warm: the read's landed state (ReadLanding::Ticket::StateFor)
  bool pipelined = false;  // the read of read_key is still running: restore from `landing` as it fills
  // A leader (sched/prefix_donor.h): copy the common prefix from this busy
  // agent's slot (the source's state is then kResident). Valid during the
  // admission that set it only.
  const Agent* leader = nullptr;
};

struct Scheduler::Waiting {
  api::GenerationRequest req;
  std::shared_ptr<api::GenerationSink> sink;
  Clock::time_point received;
  std::string prompt;  // rendered (chat template applied)
  engine::TokenizedText fresh;  // prompt tokenized with BOS (on the submitting thread)
  std::vector<engine::TextRange> plain;  // the prompt's ranges tokenized without special parsing
  // tools / response_format: constrains sampling (null: none). Compiled and
  // bounded on the submitting thread (engine/grammar.h), shared read-only.
  std::shared_ptr<const engine::Grammar> grammar;
  std::shared_ptr<const engine::ReplyFormat> reply_format;  // null: the reply is plain text
  size_t head_bytes = 0;  // of `prompt`: its system text and tools (HeadBytes); 0: unknown
  // Its PromptTokenCache entry (TokenizePrompt), put under the agent that
  // runs it once admitted; null: none.
  std::shared_ptr<const engine::PromptTokens> prompt_entry;
  // Side requests (TryAdmit): decided once, at the first admission attempt;
  // side_of is then the agent named by the client, req.agent_id the side agent.
  bool side_checked = false;
  std::optional<AgentKey> side_of;
  // It takes the main role from a conversation of another head
  // (SideDecision::takes_over): its agent's cache is dropped once it is idle.
  bool takes_over = false;
  // Its agent starts from a prefix donor's cache (SeedFromDonor): any common
  // prefix is reused, however small a share of the donor's text it is.
  bool seeded = false;
};

struct Scheduler::Active {
  std::unique_ptr<Waiting> w;
  Agent* agent = nullptr;
  CachedSequence committed_seq;              // the agent's sequence before this turn (restored on failure)
  std::vector<PoolBlock> restored_blocks;    // hot/warm: the blocks the slot was restored from
  std::optional<AgentKey> shared_from;       // another agent whose cache the slot started from
  int slot = -1;
  std::vector<int32_t> pending;              // prompt tokens to prefill
  std::vector<engine::TokenSpan> pending_spans;
  size_t n_fed = 0;                          // pending tokens already in the slot
  bool decoding = false;                     // prompt done; next_token to feed
  int32_t next_token = -1;
  std::unique_ptr<engine::Sampler> sampler;
  std::unique_ptr<engine::ReplyParser> parser;  // when w->reply_format is set
  std::string out;                           // generated text (EOG excluded)
  size_t emitted = 0;                        // bytes of `out` sent
  int64_t n_generated = 0;
  int64_t max_tokens = 0;
  size_t max_stop_len = 0;
  api::Usage usage;
  bool done = false;
  int batch_row = -1;                        // this iteration: item index with logits
  size_t batch_fed = 0;                      // this iteration: prefill tokens in the batch
  // A pipelined restore still running (scheduler_pipelined.cc): the import,
  // the read it follows (agent_reads_'s entry, in flight) and its landing.
  // (The landing before the import: members are destroyed in reverse, and
  // the import's destructor joins a thread that reads the landing.)
  std::shared_ptr<ReadLanding::Ticket> pipelined_landing;
  std::unique_ptr<engine::LayerGatedImport> gated_import;
  std::optional<AgentKey> pipelined_read;
  bool pipelined_yielded = false;  // its gated decode gave way to a request: it now waits for its import
};

// A save's BlockProvider over `blocks` (by index, checked against the id
// asked for; Internal "<what>: block not available" otherwise). `blocks`
// must outlive it.
BlockProvider ProviderOfBlocks(const std::vector<PoolBlock>& blocks, const char* what);

// A pipelined restore given up (AbandonPipelined): its import thread may
// still copy rows (from an abandoned landing: garbage) into `slot`.
// (The landing before the import: the import's thread reads it.)
struct Scheduler::AbandonedImport {
  std::shared_ptr<ReadLanding::Ticket> landing;
  std::unique_ptr<engine::LayerGatedImport> import;
  int slot = -1;
};

}  // namespace agentkv::sched
