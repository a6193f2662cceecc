#include "api/errors.h"

#include <nlohmann/json.hpp>

namespace agentkv::api {

ApiError ApiErrorFromStatus(const Status& status, std::string param) {
  ApiError e;
  e.message = status.message().empty() ? status.ToString() : status.message();
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
    default:
      e.http_status = 500;
      e.type = "server_error";
      e.code = "internal_error";
      break;
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
