#pragma once
// The event stream of a streamed POST /v1/messages, as Anthropic sends it:
//
//   event: message_start        {"type":"message_start","message":{... "content":[], "usage":{input...}}}
//   event: content_block_start  {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}
//   event: ping                 {"type":"ping"}
//   event: content_block_delta  {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"..."}}
//   ...
//   event: content_block_stop   {"type":"content_block_stop","index":0}
//   event: message_delta        {"type":"message_delta","delta":{"stop_reason","stop_sequence"},"usage":{...}}
//   event: message_stop         {"type":"message_stop"}
//
// Blocks open lazily, in the order the model writes them: with thinking
// enabled (MessageMeta::thinking) a thinking block at the first thinking
//   event: content_block_start  {"index":0,"content_block":{"type":"thinking","thinking":""}}
//   event: content_block_delta  {"index":0,"delta":{"type":"thinking_delta","thinking":"..."}}
//   event: content_block_delta  {"index":0,"delta":{"type":"signature_delta","signature":""}}  (as it closes)
// (without, thinking is dropped), a text block at
// the first text, a tool_use block at each tool call's first piece
//   event: content_block_start  {"index":1,"content_block":{"type":"tool_use","id":"toolu_...","name","input":{}}}
//   event: content_block_delta  {"index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}
// each closed (content_block_stop) when the next one opens or the message
// ends; ping follows the first content_block_start. A reply with no output
// at all still gets one (empty) text block. stop_reason "tool_use" after calls.
// An error after the stream began is "event: error" with Anthropic's error
// body, and the stream ends there (no message_stop).

#include <string>
#include <string_view>

#include "api/anthropic_json.h"
#include "api/stream_encoder.h"
#include "api/utf8.h"

namespace agentkv::api {

class AnthropicSseEncoder final : public StreamEncoder {
 public:
  explicit AnthropicSseEncoder(MessageMeta meta) : meta_(std::move(meta)) {}

  std::string Start(const Usage& prompt_usage) override;  // message_start
  std::string Delta(std::string_view bytes) override;
  std::string Reasoning(std::string_view bytes) override;
  std::string ToolCall(const ToolCallDelta& delta) override;
  std::string Finish(FinishReason reason, const Usage& usage) override;
  std::string Error(const ApiError& error) override;
  bool done() const override { return done_; }

 private:
  std::string TextDelta(const std::string& text);  // opens a text block if needed
  enum class BlockKind { kText, kThinking, kToolUse };
  std::string OpenBlock(BlockKind kind, const std::string& id = "", const std::string& name = "");
  std::string CloseBlock();
  std::string FlushPending();  // thinking and text bytes held by the UTF-8 splitters

  MessageMeta meta_;
  int next_index_ = 0;        // index of the next block to open
  int open_index_ = -1;       // the open block, -1: none
  BlockKind open_kind_ = BlockKind::kText;
  int last_tool_index_ = -1;  // the block of the current tool call
  bool started_ = false;
  bool done_ = false;
  Utf8Splitter utf8_;
  Utf8Splitter thinking_utf8_;
};

}  // namespace agentkv::api
