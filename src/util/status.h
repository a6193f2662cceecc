#pragma once
// Status and Result<T>: errors as values (LevelDB style).
//
// Anything that can fail because of the outside world (files, models, client
// input) returns [[nodiscard]] Status or Result<T>. Programmer errors assert.
// Messages are prefixed with the failing operation's name, e.g.
// "load model: /x.gguf: no such file".

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace agentkv {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // bad input from a caller or client
  kNotFound,          // a named thing does not exist
  kAlreadyExists,
  kCorruption,        // bytes on disk or in a buffer fail validation
  kIOError,           // the OS refused (ENOSPC, EIO, ...)
  kUnsupported,       // valid input we do not handle (architecture, type)
  kResourceExhausted, // budget, queue or slot limit reached
  kFailedPrecondition,
  kUnavailable,       // try again later (loading, shutting down)
  kCancelled,
  kInternal,
  kOutOfRange,        // a value past a hard limit (e.g. a prompt longer than the context)
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Corruption: <message>", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>" (same code and
  // quantity).
  Status WithContext(const std::string& context) const;

  // An amount past a limit, as numbers for callers that must branch on or
  // reword them without parsing the message: e.g. OutOfRange for a prompt
  // carries {its tokens, the context's tokens} (api/ words it per API).
  struct Quantity {
    int64_t amount = 0;
    int64_t limit = 0;
  };
  // Returns a copy carrying `q` (REQUIRES: !ok()).
  Status WithQuantity(Quantity q) const {
    assert(!ok());
    Status s = *this;
    s.quantity_ = q;
    return s;
  }
  // Set only by WithQuantity.
  const std::optional<Quantity>& quantity() const { return quantity_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::optional<Quantity> quantity_;
};

// Result<T>: a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}                // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {         // NOLINT
    assert(!status_.ok() && "Result constructed from an OK status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace agentkv

// Propagates a non-OK Status from an expression returning Status.
#define AGENTKV_RETURN_IF_ERROR(expr)              \
  do {                                             \
    ::agentkv::Status _st = (expr);                \
    if (!_st.ok()) return _st;                     \
  } while (0)

#define AGENTKV_CONCAT_INNER(a, b) a##b
#define AGENTKV_CONCAT(a, b) AGENTKV_CONCAT_INNER(a, b)
// AGENTKV_ASSIGN_OR_RETURN(auto x, MakeX()): x = value or return the status.
#define AGENTKV_ASSIGN_OR_RETURN(decl, expr)                                  \
  auto AGENTKV_CONCAT(_res_, __LINE__) = (expr);                              \
  if (!AGENTKV_CONCAT(_res_, __LINE__).ok())                                  \
    return AGENTKV_CONCAT(_res_, __LINE__).status();                          \
  decl = std::move(AGENTKV_CONCAT(_res_, __LINE__)).value()
