#pragma once
// The event stream of a streamed POST /v1/responses, as OpenAI sends it:
// every frame is "event: TYPE\ndata: {"type":TYPE,"sequence_number":N,...}\n\n"
// with N = 0, 1, 2, ...
//
//   response.created / response.in_progress   {"response": {... "status":"in_progress","output":[]}}
//   a message (at the first text):
//     response.output_item.added      {"output_index","item":{"type":"message","status":"in_progress","content":[]}}
//     response.content_part.added     {"item_id","output_index","content_index":0,"part":{"type":"output_text","text":""}}
//     response.output_text.delta      {"item_id","output_index","content_index":0,"delta"}   ...
//     response.output_text.done       {... "text"}    response.content_part.done {... "part"}
//     response.output_item.done       {"output_index","item":{... the whole message}}
//   a function call (at each call's first piece):
//     response.output_item.added      {"item":{"type":"function_call","call_id","name","arguments":""}}
//     response.function_call_arguments.delta {"item_id","output_index","delta"}   ...
//     response.function_call_arguments.done  {"item_id","output_index","name","arguments"}
//     response.output_item.done
//   the model's thinking (split out of the reply) as a reasoning item:
//     response.output_item.added, response.reasoning_text.delta ...,
//     response.reasoning_text.done, response.output_item.done
//   response.completed (or response.incomplete: max_output_tokens)
//     {"response": {... the whole Response, usage included}}
//
// Items open in the order the model writes them and close when the next
// one opens or the response ends; a reply with no output at all still gets
// one (empty) message, as the non-streamed body does. The final response's
// output equals the non-streamed one's (same item ids). An error after the
// stream began is response.failed ({"response":{"status":"failed","error":
// {"code","message"}}}) and the stream ends there.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/responses_json.h"
#include "api/stream_encoder.h"
#include "api/utf8.h"

namespace agentkv::api {

class ResponsesSseEncoder final : public StreamEncoder {
 public:
  explicit ResponsesSseEncoder(ResponsesMeta meta) : meta_(std::move(meta)) {}

  std::string Start(const Usage& prompt_usage) override;  // created + in_progress
  std::string Delta(std::string_view bytes) override;
  std::string Reasoning(std::string_view bytes) override;
  std::string ToolCall(const ToolCallDelta& delta) override;
  std::string Finish(FinishReason reason, const Usage& usage) override;
  std::string Error(const ApiError& error) override;
  bool done() const override { return done_; }

 private:
  enum class ItemKind { kNone, kMessage, kReasoning, kFunctionCall };
  std::string Frame(const char* type, nlohmann::json data);
  std::string Open(ItemKind kind, const std::string& call_id = "", const std::string& name = "");
  std::string Close(const char* status);
  std::string Text(const std::string& text);       // opens a message if needed
  std::string Thinking(const std::string& text);   // opens a reasoning item if needed
  std::string FlushPending();

  ResponsesMeta meta_;
  int64_t sequence_ = 0;
  bool started_ = false;
  bool done_ = false;
  nlohmann::json output_ = nlohmann::json::array();  // closed items
  ItemKind open_ = ItemKind::kNone;
  std::string item_id_;
  std::string item_text_;  // the open item's text or arguments
  ::agentkv::api::ToolCall call_;  // the open call's id and name
  Utf8Splitter utf8_;
  Utf8Splitter reasoning_utf8_;
};

}  // namespace agentkv::api
