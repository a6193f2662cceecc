#pragma once
// ReplyEmitter: a turn's generated text on its way to the client's sink.
// Stop strings end the reply right before the earliest one, and text that
// could still become the start of one is held back until it cannot; with a
// reply format (tools, structured output) the text goes through the reply
// parser, which sends content, reasoning and tool-call deltas.
//
// Thread safety: none; one turn's, on the inference thread.
// Invariants: emitted() <= text().size(); no stop string occurs in text().

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/backend.h"
#include "engine/chat_format.h"

namespace agentkv::sched {

class ReplyEmitter {
 public:
  // `sink` and `stops` are not owned and must outlive this. `format` null:
  // the reply is plain text (OnDelta only).
  ReplyEmitter(api::GenerationSink& sink, const std::vector<std::string>& stops,
               std::shared_ptr<const engine::ReplyFormat> format);
  ~ReplyEmitter();

  // Appends a sampled token's text and sends what can no longer be part of a
  // stop string. True: a stop string now ends the reply (text() is cut right
  // before it; stop_sequence() names it) and the turn must finish.
  bool Append(std::string_view piece);
  // The reply ended: sends what was held back and the parser's last deltas.
  // Returns `reason`, as kToolCalls when a kStop reply made tool calls.
  api::FinishReason Finish(api::FinishReason reason);

  const std::string& text() const { return out_; }  // the reply so far (EOG excluded)
  size_t emitted() const { return emitted_; }       // bytes of text() sent
  const std::string& stop_sequence() const { return stop_sequence_; }  // empty: none matched

 private:
  void Send(std::string_view text);

  api::GenerationSink& sink_;
  const std::vector<std::string>& stops_;
  size_t max_stop_len_ = 0;
  std::unique_ptr<engine::ReplyParser> parser_;  // null: plain text
  std::string out_;
  size_t emitted_ = 0;
  std::string stop_sequence_;
};

}  // namespace agentkv::sched
