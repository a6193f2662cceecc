// POST /v1/chat/completions, /v1/completions, /v1/messages (Anthropic) and
// /v1/responses:
// validate, submit, then either collect the reply (JSON) or hand an SSE
// stream to the adapter.
// Both paths read the same GenerationChannel events through the same
// Utf8Splitter, so streamed and non-streamed text are equal by construction.

#include <chrono>

#include "api/agent_identity.h"
#include "api/anthropic_json.h"
#include "api/anthropic_sse.h"
#include "api/generation_channel.h"
#include "api/openai_json.h"
#include "api/responses_json.h"
#include "api/responses_sse.h"
#include "api/router.h"
#include "api/sse.h"
#include "util/log.h"

namespace agentkv::api {
namespace {

// 499 (client closed request): nobody reads it, but metrics and logs do.
HttpResponse ClientGoneResponse() {
  return ErrorResponse(ApiErrorFromStatus(Status::Cancelled("client disconnected")));
}

// The SSE body of one streamed response.
class SseBodyStream final : public BodyStream {
 public:
  // `anthropic`: errors are typed as Anthropic's (for the log).
  SseBodyStream(std::shared_ptr<GenerationChannel> channel, CancellationToken cancel,
                std::vector<GenerationEvent> pending, std::unique_ptr<StreamEncoder> encoder, HttpMetrics* metrics,
                std::shared_ptr<void> tenant_ticket, std::shared_ptr<RequestLog> log, bool anthropic)
      : log_(std::move(log)),
        anthropic_(anthropic),
        tenant_ticket_(std::move(tenant_ticket)),
        channel_(std::move(channel)),
        cancel_(std::move(cancel)),
        pending_(std::move(pending)),
        encoder_(std::move(encoder)),
        metrics_(metrics) {
    metrics_->StreamOpened();
  }
  ~SseBodyStream() override {
    if (!encoder_->done()) Cancel();
    metrics_->StreamClosed();
  }

  ReadResult Read(std::chrono::milliseconds wait, std::string* out) override {
    if (encoder_->done()) return ReadResult::kEnd;
    if (pending_.empty() && !channel_->Wait(wait, &pending_)) return ReadResult::kIdle;
    const size_t before = out->size();
    for (const GenerationEvent& e : pending_) {
      switch (e.kind) {
        case GenerationEvent::Kind::kStart:
          log_->SetUsage(e.usage);
          *out += encoder_->Start(e.usage);
          break;
        case GenerationEvent::Kind::kDelta:
          *out += encoder_->Delta(e.text);
          break;
        case GenerationEvent::Kind::kReasoning:
          *out += encoder_->Reasoning(e.text);
          break;
        case GenerationEvent::Kind::kToolCall:
          *out += encoder_->ToolCall(e.tool_call);
          break;
        case GenerationEvent::Kind::kLogprob:
          *out += encoder_->Logprob(e.logprob);
          break;
        case GenerationEvent::Kind::kFinish:
          log_->SetUsage(e.usage);
          *out += encoder_->Finish(e.finish, e.usage);
          break;
        case GenerationEvent::Kind::kError: {
          const ApiError error = ApiErrorFromStatus(e.status);
          error_type_ = anthropic_ ? AnthropicError(error).type : error.type;
          *out += encoder_->Error(error);
          break;
        }
      }
    }
    pending_.clear();
    if (encoder_->done()) log_->Finish(200, error_type_);  // the status line went out as 200
    if (out->size() > before) return ReadResult::kData;
    return encoder_->done() ? ReadResult::kEnd : ReadResult::kIdle;
  }

  void Cancel() override {
    if (!cancelled_) {
      cancelled_ = true;
      cancel_.Cancel();
      metrics_->ClientGone();
    }
  }

 private:
  std::shared_ptr<RequestLog> log_;  // a cancelled stream's is logged (499) when the stream dies
  const bool anthropic_;
  std::string error_type_;  // of the error that ended the stream, if one did
  std::shared_ptr<void> tenant_ticket_;  // the tenant's in-flight slot, held until the stream ends
  std::shared_ptr<GenerationChannel> channel_;
  CancellationToken cancel_;
  std::vector<GenerationEvent> pending_;
  std::unique_ptr<StreamEncoder> encoder_;
  HttpMetrics* metrics_;
  bool cancelled_ = false;
};

// The client's bytes a chat template may render into the prompt: message
// text, reasoning and tool calls, and the tools (templates put their names,
// descriptions and schemas in the system prompt). Summed before rendering,
// so that megabytes of tool text are refused at once, not after the
// template and the tokenizer have worked through them.
int64_t RenderableBytes(const GenerationRequest& gen) {
  int64_t n = static_cast<int64_t>(gen.prompt.size());
  for (const ChatMessage& m : gen.messages) {
    n += static_cast<int64_t>(m.content.size() + m.reasoning_content.size());
    for (const ToolCall& c : m.tool_calls) n += static_cast<int64_t>(c.name.size() + c.arguments.size());
  }
  for (const ToolDefinition& t : gen.tools) {
    n += static_cast<int64_t>(t.name.size() + t.description.size() + t.parameters.size());
  }
  return n;
}

int64_t NowUnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

HttpResponse Router::Generate(const HttpRequest& req, const std::string& ns, Route route, bool isolated,
                              const std::shared_ptr<RequestLog>& log) {
  const RequestKind kind = route == Route::kCompletion ? RequestKind::kCompletion : RequestKind::kChat;
  const bool anthropic = route == Route::kMessages;
  const bool responses = route == Route::kResponses;
  const auto received = std::chrono::steady_clock::now();
  if (req.body.size() > options_.max_body_bytes) {
    ApiError e = InvalidRequest("The request body exceeds " + std::to_string(options_.max_body_bytes) +
                                    " bytes.",
                                "", "request_too_large");
    e.http_status = 413;
    return ErrorResponse(e);
  }
  if (!backend_->IsReady()) {
    return ErrorResponse(ApiErrorFromStatus(Status::Unavailable("The model is loading; retry shortly.")));
  }

  // Admission before the parse, which costs ~25x the body in JSON DOM: the
  // tenant's in-flight ticket (held until the response ends), then the
  // server-wide bound on the bytes being parsed at once (parse_budget.h).
  std::shared_ptr<void> ticket = tenants_.Acquire(ns);
  if (!ticket) {
    return ErrorResponse(ApiErrorFromStatus(Status::ResourceExhausted(
        "This API key has " + std::to_string(tenants_.max_per_tenant()) +
        " requests in flight, its limit; retry when one has finished.")));
  }
  std::shared_ptr<void> parsing = parse_budget_->Acquire(req.body.size());
  if (!parsing) {
    return ErrorResponse(ApiErrorFromStatus(Status::Unavailable(
        "The server is parsing other large requests (at most " + std::to_string(parse_budget_->max_bytes()) +
        " bytes at once); retry shortly.")));
  }

  ParseContext ctx;
  ctx.model_id = backend_->ModelId();
  ctx.model_aliases = options_.model_aliases;
  ctx.strict_model_name = options_.strict_model_name;
  ctx.header_agent_id = req.Header("X-Agent-Id");
  ctx.header_session_id = req.Header("X-Session-ID");
  ctx.tool_headers = ReadAgentToolHeaders([&req](std::string_view name) { return req.Header(name); });
  ctx.system_fingerprint = backend_->SystemFingerprint();
  GenerationRequest gen;
  std::string model_echo;
  ResponsesMeta responses_meta;
  std::optional<ApiError> error = anthropic   ? ParseMessagesRequest(req.body, ctx, &gen, &model_echo)
                                  : responses ? ParseResponsesRequest(req.body, ctx, &gen, &responses_meta)
                                  : kind == RequestKind::kChat ? ParseChatRequest(req.body, ctx, &gen)
                                                               : ParseCompletionRequest(req.body, ctx, &gen);
  parsing.reset();  // the DOM is gone; what remains is ~1x the body
  if (error) return ErrorResponse(*error);
  gen.namespace_id = ns;
  log->SetAgent(ns, gen.agent_id, gen.agent_source);
  gen.isolated = isolated;
  gen.request_id = NextRequestId(route);
  gen.received = received;

  // A prompt too long for the context whatever its tokens is refused by its
  // size, before anything tokenizes it; the exact token count is Submit's.
  const char* prompt_param = responses ? "input" : kind == RequestKind::kChat ? "messages" : "prompt";
  const int64_t prompt_bytes = RenderableBytes(gen);
  // Every rendered message takes at least one token, so more messages than
  // the context holds cannot fit either (even empty ones).
  const bool too_many_messages = static_cast<int64_t>(gen.messages.size()) >= backend_->ContextTokens();
  if (prompt_bytes > backend_->MaxPromptBytes() || too_many_messages) {
    ApiError e = InvalidRequest("The prompt (messages and tools) is " + std::to_string(prompt_bytes) + " bytes in " +
                                    std::to_string(gen.messages.size()) + " messages: more than the context of " +
                                    std::to_string(backend_->ContextTokens()) + " tokens can hold.",
                                prompt_param, "context_length_exceeded");
    e.http_status = 413;
    return ErrorResponse(e);
  }

  const ResponseMeta meta{gen.request_id, ctx.model_id, NowUnixSeconds(), kind, ctx.system_fingerprint,
                          gen.sampling.top_logprobs};
  const MessageMeta message_meta{gen.request_id, model_echo, anthropic && gen.enable_thinking.value_or(false)};
  responses_meta.id = meta.id;
  responses_meta.created_at = meta.created;
  const bool stream = gen.stream;
  const bool include_usage = gen.include_usage;
  CancellationToken cancel = gen.cancel;
  auto channel = std::make_shared<GenerationChannel>();
  Status submitted = backend_->Submit(std::move(gen), channel);
  if (!submitted.ok()) {
    return ErrorResponse(ApiErrorFromStatus(
        submitted, submitted.code() == StatusCode::kOutOfRange ? prompt_param : ""));
  }

  // Wait for the first event: an error before any output still gets a proper
  // HTTP status. Non-streamed requests wait for the terminal event.
  std::vector<GenerationEvent> events;
  auto client_gone = [&] { return req.client_gone && req.client_gone(); };
  for (;;) {
    const bool got = channel->Wait(options_.poll_interval, &events);
    if (got && !events.empty()) {
      if (events.front().kind == GenerationEvent::Kind::kError) {
        return ErrorResponse(ApiErrorFromStatus(events.front().status));
      }
      if (stream || events.back().terminal()) break;
    }
    if (client_gone()) {
      cancel.Cancel();
      metrics_.ClientGone();
      return ClientGoneResponse();
    }
  }

  if (stream) {
    HttpResponse r;
    r.content_type = "text/event-stream";
    r.headers.emplace_back("Cache-Control", "no-cache");
    r.headers.emplace_back("X-Request-Id", meta.id);
    if (anthropic) r.headers.emplace_back("request-id", meta.id);
    std::unique_ptr<StreamEncoder> encoder;
    if (anthropic) {
      encoder = std::make_unique<AnthropicSseEncoder>(message_meta);
    } else if (responses) {
      encoder = std::make_unique<ResponsesSseEncoder>(std::move(responses_meta));
    } else {
      encoder = std::make_unique<SseEncoder>(meta, include_usage);
    }
    log->SetStream();
    r.stream = std::make_shared<SseBodyStream>(channel, cancel, std::move(events), std::move(encoder), &metrics_,
                                               std::move(ticket), log, anthropic);
    return r;
  }

  Utf8Splitter utf8, reasoning_utf8;
  std::string text, reasoning;
  std::vector<ToolCall> tool_calls;
  std::vector<TokenLogprob> logprobs;
  for (const GenerationEvent& e : events) {
    if (e.kind == GenerationEvent::Kind::kLogprob) {
      logprobs.push_back(e.logprob);
    } else if (e.kind == GenerationEvent::Kind::kDelta) {
      text += utf8.Push(e.text);
    } else if (e.kind == GenerationEvent::Kind::kReasoning) {
      reasoning += reasoning_utf8.Push(e.text);
    } else if (e.kind == GenerationEvent::Kind::kToolCall) {
      const ToolCallDelta& d = e.tool_call;
      if (d.index >= tool_calls.size()) tool_calls.resize(d.index + 1);
      if (!d.id.empty()) tool_calls[d.index].id = d.id;
      if (!d.name.empty()) tool_calls[d.index].name = d.name;
      tool_calls[d.index].arguments += d.arguments;
    } else if (e.kind == GenerationEvent::Kind::kError) {
      return ErrorResponse(ApiErrorFromStatus(e.status));
    } else if (e.kind == GenerationEvent::Kind::kFinish) {
      text += utf8.Flush();
      reasoning += reasoning_utf8.Flush();
      log->SetUsage(e.usage);
      HttpResponse r;
      r.headers.emplace_back("X-Request-Id", meta.id);
      if (anthropic) r.headers.emplace_back("request-id", meta.id);
      if (!e.usage.agent_id.empty()) r.headers.emplace_back("X-Agent-Id", e.usage.agent_id);
      r.body = anthropic   ? AnthropicMessageJson(message_meta, reasoning, text, tool_calls, e.finish, e.usage)
               : responses ? ResponsesJson(responses_meta, reasoning, text, tool_calls, e.finish, e.usage)
                           : CompletionJson(meta, reasoning, text, tool_calls, e.finish, e.usage, logprobs);
      return r;
    }
  }
  AKV_LOG_ERROR("api: %s: backend ended without a terminal event", meta.id.c_str());
  return ErrorResponse(ApiErrorFromStatus(Status::Internal("generation ended unexpectedly")));
}

}  // namespace agentkv::api
