// libFuzzer target: request body -> GenerationRequest (ParseChatRequest and
// ParseCompletionRequest) on arbitrary bytes (AGENTKV_FUZZ=ON, scripts/fuzz.sh).
//
// Oracle besides "no crash, no exception, no sanitizer report": an accepted
// request satisfies the documented contract (docs/api.md: ranges, non-empty
// messages, <= 4 non-empty stop strings, a valid agent id), and a refused one
// carries a 4xx status and a message; nothing accepted nests deeper than
// kMaxJsonDepth (issue 29).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "api/openai_json.h"
#include "util/json_depth.h"
#include "util/names.h"

namespace {

using namespace agentkv::api;

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "contract violated: %s\n", what);
  std::abort();
}

void CheckResult(const std::optional<ApiError>& error, const GenerationRequest& r, RequestKind kind) {
  if (error) {
    Check(error->http_status == 400 || error->http_status == 404, "refusal is 400 or 404");
    Check(!error->message.empty() && !error->type.empty(), "refusal has a message and a type");
    Check(!ApiErrorJson(*error).empty(), "refusal serializes");
    return;
  }
  Check(kind != RequestKind::kChat || !r.messages.empty(), "chat has messages");
  Check(kind != RequestKind::kCompletion || !r.prompt.empty(), "completion has a prompt");
  const SamplingParams& s = r.sampling;
  Check(!s.max_tokens || *s.max_tokens >= 1, "max_tokens >= 1");
  Check(std::isfinite(s.temperature) && s.temperature >= 0 && s.temperature <= 2, "temperature in [0, 2]");
  Check(std::isfinite(s.top_p) && s.top_p > 0 && s.top_p <= 1, "top_p in (0, 1]");
  Check(s.top_k >= 0, "top_k >= 0");
  Check(s.stop.size() <= 4, "<= 4 stop strings");
  for (const auto& stop : s.stop) Check(!stop.empty(), "stop strings non-empty");
  Check(r.agent_id.empty() || agentkv::ValidateName("agent id", r.agent_id).ok(), "agent id valid");
  Check(!r.include_usage || r.stream, "include_usage only with stream");
  // Issue 29: nothing accepted nests deeper than the chat layer may walk.
  for (const ToolDefinition& t : r.tools) Check(agentkv::JsonDepthWithin(t.parameters), "tool schema depth bounded");
  Check(agentkv::JsonDepthWithin(r.response_format.schema), "response schema depth bounded");
  for (const ChatMessage& m : r.messages) {
    for (const ToolCall& c : m.tool_calls) Check(agentkv::JsonDepthWithin(c.arguments), "arguments depth bounded");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  ParseContext ctx;
  ctx.model_id = "tiny";
  ctx.model_aliases = {"gpt-4o"};
  GenerationRequest chat;
  CheckResult(ParseChatRequest(body, ctx, &chat), chat, RequestKind::kChat);
  GenerationRequest completion;
  CheckResult(ParseCompletionRequest(body, ctx, &completion), completion, RequestKind::kCompletion);
  ctx.header_agent_id = "header-agent";  // the body's ids must agree with it
  GenerationRequest with_header;
  CheckResult(ParseChatRequest(body, ctx, &with_header), with_header, RequestKind::kChat);
  return 0;
}
