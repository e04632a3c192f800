// Errors as values for the Kubernetes client: every operation returns Result<T>, which holds
// either a value or an Error (HTTP status and the API server's reason/message). Nothing in
// metronome::kube throws to its caller.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace metronome::kube {

struct Error {
  int status = 0;       // HTTP status; 0 = no answer (connect, TLS, timeout, bad config)
  std::string reason;   // the Status object's reason ("NotFound", "Conflict", "Expired"...)
  std::string message;  // human-readable, says what was attempted

  bool NotFound() const { return status == 404; }
  bool Conflict() const { return status == 409; }
  bool Gone() const { return status == 410; }  // resourceVersion too old: relist
  // Worth retrying: no answer, 429 or a 5xx.
  bool Transient() const { return status == 0 || status == 429 || status >= 500; }
  std::string ToString() const;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool Ok() const { return value_.has_value(); }
  explicit operator bool() const { return Ok(); }
  T& Value() & { return *value_; }
  const T& Value() const& { return *value_; }
  T&& Value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  const Error& GetError() const { return error_; }

 private:
  std::optional<T> value_;
  Error error_;
};

struct Ok {};
using Status = Result<Ok>;

}  // namespace metronome::kube
