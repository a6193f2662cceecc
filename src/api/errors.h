#pragma once
// API errors: the one place where a Status becomes an HTTP status and
// OpenAI's error JSON {"error":{"message","type","param","code"}}.
//
// Status code            HTTP  type                     code
// InvalidArgument        400   invalid_request_error    (given or null)
// Unsupported            400   invalid_request_error    unsupported
// NotFound               404   not_found_error          not_found
// FailedPrecondition     409   conflict_error           conflict
// AlreadyExists          409   conflict_error           conflict
// OutOfRange             400   invalid_request_error    context_length_exceeded
// ResourceExhausted      429   rate_limit_error         rate_limit_exceeded
// Cancelled              499   cancelled                cancelled
// Unavailable            503   service_unavailable      service_unavailable
// everything else        500   server_error             internal_error
//
// No internal detail reaches a client: a 500's message is generic with a
// reference, and the Status itself (paths, errno, ...) is logged under that
// reference; other messages have absolute paths replaced by "<path>".
// 401 (auth), 404 (model), 405, 413 are built directly by the router.
//
// An OutOfRange with a quantity is a prompt past the context, in tokens: its
// message is OpenAI's ("This model's maximum context length is M tokens.
// However, your messages resulted in N tokens. ..."), which OpenAI clients
// show, and ApiError::context_overflow keeps N and M for the Anthropic
// wording (AnthropicError). A prompt refused by its bytes is a 413.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "util/status.h"

namespace agentkv::api {

// A prompt longer than the context: its tokens and the context's.
struct ContextOverflow {
  int64_t prompt_tokens = 0;
  int64_t context_tokens = 0;
};

struct ApiError {
  int http_status = 500;
  std::string type;
  std::string message;
  std::string param;  // "" -> JSON null
  std::string code;   // "" -> JSON null
  int retry_after_s = 0;  // > 0: send Retry-After (429, 503)
  std::optional<ContextOverflow> context_overflow;  // set for a token overflow only
};

// `message` with every absolute path (a '/' at the start or after a space,
// quote, '(', '=' or ':') replaced by "<path>".
std::string RedactPaths(std::string_view message);

// Maps a Status per the table above. `param` names the offending field
// ("messages", "prompt" or "input" for a prompt too long).
// Logs 5xx details (error level).
ApiError ApiErrorFromStatus(const Status& status, std::string param = "");

// 400 invalid_request_error for a bad field.
ApiError InvalidRequest(std::string message, std::string param, std::string code = "");

// The JSON body for `error`.
std::string ApiErrorJson(const ApiError& error);

}  // namespace agentkv::api
