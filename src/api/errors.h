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
// OutOfRange             413   invalid_request_error    context_length_exceeded
// ResourceExhausted      429   rate_limit_error         rate_limit_exceeded
// Cancelled              499   cancelled                cancelled
// Unavailable            503   service_unavailable      service_unavailable
// everything else        500   server_error             internal_error
//
// No internal detail reaches a client: a 500's message is generic with a
// reference, and the Status itself (paths, errno, ...) is logged under that
// reference; other messages have absolute paths replaced by "<path>".
// 401 (auth), 404 (model), 405, 413 are built directly by the router.

#include <string>
#include <string_view>

#include "util/status.h"

namespace agentkv::api {

struct ApiError {
  int http_status = 500;
  std::string type;
  std::string message;
  std::string param;  // "" -> JSON null
  std::string code;   // "" -> JSON null
  int retry_after_s = 0;  // > 0: send Retry-After (429, 503)
};

// `message` with every absolute path (a '/' at the start or after a space,
// quote, '(', '=' or ':') replaced by "<path>".
std::string RedactPaths(std::string_view message);

// Maps a Status per the table above. `param` names the offending field.
// Logs 5xx details (error level).
ApiError ApiErrorFromStatus(const Status& status, std::string param = "");

// 400 invalid_request_error for a bad field.
ApiError InvalidRequest(std::string message, std::string param, std::string code = "");

// The JSON body for `error`.
std::string ApiErrorJson(const ApiError& error);

}  // namespace agentkv::api
