#include "api/errors.h"

#include <chrono>

#include <nlohmann/json.hpp>

#include "util/hash.h"
#include "util/log.h"

namespace agentkv::api {
namespace {

bool IsPathByte(char c) { return c != ' ' && c != '"' && c != '\'' && c != ',' && c != ';' && c != ')'; }

// A short reference that ties a client's generic 500 to the logged detail.
std::string ErrorRef(const Status& status) {
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return Hex64(Xxh3_64(status.message(), static_cast<uint64_t>(now))).substr(0, 12);
}

// OpenAI's wording for chat completions; "messages" becomes the field that
// holds the prompt.
std::string OpenAiContextMessage(const ContextOverflow& o, const std::string& param) {
  const std::string what = param.empty() ? "messages" : param;
  return "This model's maximum context length is " + std::to_string(o.context_tokens) +
         " tokens. However, your " + what + " resulted in " + std::to_string(o.prompt_tokens) +
         " tokens. Please reduce the length of the " + what + ".";
}

}  // namespace

std::string RedactPaths(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (size_t i = 0; i < message.size();) {
    const bool starts_path = message[i] == '/' && (i == 0 || message[i - 1] == ' ' || message[i - 1] == '"' ||
                                                   message[i - 1] == '\'' || message[i - 1] == '(' ||
                                                   message[i - 1] == '=' || message[i - 1] == ':');
    if (!starts_path) {
      out += message[i++];
      continue;
    }
    out += "<path>";
    while (i < message.size() && IsPathByte(message[i])) ++i;
    if (i > 0 && message[i - 1] == ':' && out.back() == '>') out += ':';  // "open /x/y: ENOENT"
  }
  return out;
}

ApiError ApiErrorFromStatus(const Status& status, std::string param) {
  ApiError e;
  e.message = RedactPaths(status.message().empty() ? status.ToString() : status.message());
  e.param = std::move(param);
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      e.http_status = 400;
      e.type = "invalid_request_error";
      break;
    case StatusCode::kUnsupported:
      e.http_status = 400;
      e.type = "invalid_request_error";
      e.code = "unsupported";
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      e.type = "not_found_error";
      e.code = "not_found";
      break;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists:
      e.http_status = 409;
      e.type = "conflict_error";
      e.code = "conflict";
      break;
    case StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "rate_limit_exceeded";
      e.retry_after_s = 1;
      break;
    case StatusCode::kOutOfRange:
      // 400, not 413: OpenAI clients compact on this code with this status.
      e.http_status = 400;
      e.type = "invalid_request_error";
      e.code = "context_length_exceeded";
      if (status.quantity()) {
        const ContextOverflow o{status.quantity()->amount, status.quantity()->limit};
        e.context_overflow = o;
        e.message = OpenAiContextMessage(o, e.param);
      }
      break;
    case StatusCode::kCancelled:
      e.http_status = 499;
      e.type = "cancelled";
      e.code = "cancelled";
      break;
    case StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "service_unavailable";
      e.code = "service_unavailable";
      e.retry_after_s = 1;
      break;
    default: {
      // Internal, I/O and corruption errors carry store paths and details
      // that are the operator's business: logged, not sent.
      const std::string ref = ErrorRef(status);
      AKV_LOG_ERROR("api: internal error %s: %s", ref.c_str(), EscapeForLog(status.ToString(), 1024).c_str());
      e.http_status = 500;
      e.type = "server_error";
      e.code = "internal_error";
      e.message = "The server had an internal error (reference " + ref + "); the details are in its log.";
      break;
    }
  }
  return e;
}

ApiError InvalidRequest(std::string message, std::string param, std::string code) {
  ApiError e;
  e.http_status = 400;
  e.type = "invalid_request_error";
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

std::string ApiErrorJson(const ApiError& error) {
  nlohmann::json body = {{"error",
                          {{"message", error.message},
                           {"type", error.type},
                           {"param", error.param.empty() ? nlohmann::json() : nlohmann::json(error.param)},
                           {"code", error.code.empty() ? nlohmann::json() : nlohmann::json(error.code)}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace agentkv::api
