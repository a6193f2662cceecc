#include "api/responses_sse.h"

namespace agentkv::api {

using nlohmann::json;

std::string ResponsesSseEncoder::Frame(const char* type, json data) {
  data["type"] = type;
  data["sequence_number"] = sequence_++;
  return std::string("event: ") + type + "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) +
         "\n\n";
}

std::string ResponsesSseEncoder::Start(const Usage& /*prompt_usage*/) {
  if (started_ || done_) return "";
  started_ = true;
  const json r = ResponsesObject(meta_, "in_progress", FinishReason::kStop, json::array(), nullptr);
  std::string out = Frame("response.created", {{"response", r}});
  return out + Frame("response.in_progress", {{"response", r}});
}

std::string ResponsesSseEncoder::Open(ItemKind kind, const std::string& call_id, const std::string& name) {
  std::string out = Close("completed");
  const size_t index = output_.size();
  open_ = kind;
  item_text_.clear();
  json item;
  switch (kind) {
    case ItemKind::kMessage:
      item_id_ = ResponsesItemId(meta_, "msg", index);
      item = ResponsesMessageItem(item_id_, nullptr, "in_progress");
      break;
    case ItemKind::kReasoning:
      item_id_ = ResponsesItemId(meta_, "rs", index);
      item = ResponsesReasoningItem(item_id_, nullptr, "in_progress");
      break;
    case ItemKind::kFunctionCall:
      item_id_ = ResponsesItemId(meta_, "fc", index);
      call_ = {call_id, name, ""};
      item = ResponsesFunctionCallItem(meta_, item_id_, call_, "in_progress");
      break;
    case ItemKind::kNone:
      return out;
  }
  out += Frame("response.output_item.added", {{"output_index", index}, {"item", item}});
  if (kind == ItemKind::kMessage) {
    out += Frame("response.content_part.added",
                 {{"item_id", item_id_},
                  {"output_index", index},
                  {"content_index", 0},
                  {"part", ResponsesMessageItem(item_id_, &item_text_, "in_progress")["content"][0]}});
  }
  return out;
}

std::string ResponsesSseEncoder::Close(const char* status) {
  if (open_ == ItemKind::kNone) return "";
  const size_t index = output_.size();
  std::string out;
  json item;
  switch (open_) {
    case ItemKind::kMessage: {
      item = ResponsesMessageItem(item_id_, &item_text_, status);
      out += Frame("response.output_text.done", {{"item_id", item_id_},
                                                 {"output_index", index},
                                                 {"content_index", 0},
                                                 {"text", item_text_},
                                                 {"logprobs", json::array()}});
      out += Frame("response.content_part.done",
                   {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"part", item["content"][0]}});
      break;
    }
    case ItemKind::kReasoning:
      item = ResponsesReasoningItem(item_id_, &item_text_, status);
      out += Frame("response.reasoning_text.done",
                   {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"text", item_text_}});
      break;
    case ItemKind::kFunctionCall:
      call_.arguments = item_text_;
      item = ResponsesFunctionCallItem(meta_, item_id_, call_, "completed");
      out += Frame("response.function_call_arguments.done",
                   {{"item_id", item_id_}, {"output_index", index}, {"name", item["name"]}, {"arguments", item_text_}});
      break;
    case ItemKind::kNone:
      break;
  }
  out += Frame("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  open_ = ItemKind::kNone;
  return out;
}

std::string ResponsesSseEncoder::Text(const std::string& text) {
  if (text.empty()) return "";
  std::string out = open_ == ItemKind::kMessage ? "" : Open(ItemKind::kMessage);
  item_text_ += text;
  return out + Frame("response.output_text.delta", {{"item_id", item_id_},
                                                     {"output_index", output_.size()},
                                                     {"content_index", 0},
                                                     {"delta", text},
                                                     {"logprobs", json::array()}});
}

std::string ResponsesSseEncoder::Thinking(const std::string& text) {
  if (text.empty()) return "";
  std::string out = open_ == ItemKind::kReasoning ? "" : Open(ItemKind::kReasoning);
  item_text_ += text;
  return out + Frame("response.reasoning_text.delta",
                     {{"item_id", item_id_}, {"output_index", output_.size()}, {"content_index", 0}, {"delta", text}});
}

std::string ResponsesSseEncoder::FlushPending() {
  std::string out = Thinking(reasoning_utf8_.Flush());
  return out + Text(utf8_.Flush());
}

std::string ResponsesSseEncoder::Delta(std::string_view bytes) {
  if (done_) return "";
  std::string out = Start(Usage{});
  out += Thinking(reasoning_utf8_.Flush());
  return out + Text(utf8_.Push(bytes));
}

std::string ResponsesSseEncoder::Reasoning(std::string_view bytes) {
  if (done_) return "";
  std::string out = Start(Usage{});
  out += Text(utf8_.Flush());
  return out + Thinking(reasoning_utf8_.Push(bytes));
}

std::string ResponsesSseEncoder::ToolCall(const ToolCallDelta& delta) {
  if (done_) return "";
  std::string out = Start(Usage{});
  out += FlushPending();
  if (!delta.id.empty() || open_ != ItemKind::kFunctionCall) out += Open(ItemKind::kFunctionCall, delta.id, delta.name);
  if (delta.arguments.empty()) return out;
  item_text_ += delta.arguments;
  return out + Frame("response.function_call_arguments.delta",
                     {{"item_id", item_id_}, {"output_index", output_.size()}, {"delta", delta.arguments}});
}

std::string ResponsesSseEncoder::Finish(FinishReason reason, const Usage& usage) {
  if (done_) return "";
  std::string out = Start(usage);
  out += FlushPending();
  if (output_.empty() && open_ == ItemKind::kNone) out += Open(ItemKind::kMessage);  // no output: one empty message
  out += Close(reason == FinishReason::kLength ? "incomplete" : "completed");
  const json r = ResponsesObject(meta_, nullptr, reason, output_, &usage);
  out += Frame(reason == FinishReason::kLength ? "response.incomplete" : "response.completed", {{"response", r}});
  done_ = true;
  return out;
}

std::string ResponsesSseEncoder::Error(const ApiError& error) {
  if (done_) return "";
  std::string out = Start(Usage{});
  json r = ResponsesObject(meta_, "failed", FinishReason::kStop, output_, nullptr);
  r["error"] = {{"code", error.http_status == 429 ? "rate_limit_exceeded" : "server_error"},
                {"message", error.message}};
  done_ = true;
  return out + Frame("response.failed", {{"response", r}});
}

}  // namespace agentkv::api
