// Error reporting of the stand-in: the last error (ncclGetLastError), one-time warnings, and the
// internal exception type that carries an ncclResult_t up to the C ABI boundary (api.cpp), where
// every exception is caught and turned into a return code.
#pragma once

#include <nccl.h>

#include <stdexcept>
#include <string>

namespace metronome::testbed::standin {

// An error with the NCCL result code it should be reported as.
class Error : public std::runtime_error {
 public:
  Error(ncclResult_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ncclResult_t Code() const noexcept { return code_; }

 private:
  ncclResult_t code_;
};

// Records `message` as the calling thread's last error (what ncclGetLastError returns).
void SetLastError(const std::string& message) noexcept;
const char* LastError() noexcept;

// Records the message and returns `code`: `return fail(ncclInvalidArgument, "...")`.
ncclResult_t Fail(ncclResult_t code, const std::string& message) noexcept;

// Prints "[nccl-gloo] WARN message" on stderr the first time `key` is seen in this process.
void WarnOnce(const std::string& key, const std::string& message) noexcept;

// Debug log line on stderr when METRONOME_STANDIN_DEBUG is set to a non-empty value other than 0.
bool DebugEnabled() noexcept;
void DebugLog(const std::string& message) noexcept;

}  // namespace metronome::testbed::standin

namespace metronome::testbed::standin {

// Inside a catch block: the NCCL result for the exception being handled, and its message.
// Gloo's I/O errors and timeouts give ncclSystemError, failed internal checks ncclInternalError.
ncclResult_t CurrentExceptionResult(std::string& message) noexcept;

}  // namespace metronome::testbed::standin
