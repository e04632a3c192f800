#include "errors.hpp"

#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

namespace metronome::testbed::standin {
namespace {
thread_local std::string t_last_error;
}  // namespace

void SetLastError(const std::string& message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {
    // Out of memory while recording an error: keep the previous message.
  }
}

const char* LastError() noexcept {
  return t_last_error.c_str();
}

ncclResult_t Fail(ncclResult_t code, const std::string& message) noexcept {
  SetLastError(message);
  if (DebugEnabled()) DebugLog("error " + std::to_string(static_cast<int>(code)) + ": " + message);
  return code;
}

void WarnOnce(const std::string& key, const std::string& message) noexcept {
  try {
    static std::mutex mu;
    static std::set<std::string> seen;
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(key).second) return;
    std::fprintf(stderr, "[nccl-gloo] WARN %s\n", message.c_str());
  } catch (...) {
    // Warnings are best effort.
  }
}

bool DebugEnabled() noexcept {
  static const bool kEnabled = [] {
    const char* v = std::getenv("METRONOME_STANDIN_DEBUG");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return kEnabled;
}

void DebugLog(const std::string& message) noexcept {
  std::fprintf(stderr, "[nccl-gloo] DEBUG %s\n", message.c_str());
}

ncclResult_t CurrentExceptionResult(std::string& message) noexcept {
  try {
    try {
      throw;
    } catch (const Error& e) {
      message = e.what();
      return e.Code();
    } catch (const gloo::IoException& e) {
      message = std::string("network error: ") + e.what();
      return ncclSystemError;
    } catch (const gloo::Exception& e) {
      message = std::string("gloo error: ") + e.what();
      return ncclInternalError;
    } catch (const gloo::EnforceNotMet& e) {
      message = std::string("gloo check failed: ") + e.what();
      return ncclInternalError;
    } catch (const std::bad_alloc&) {
      message = "out of host memory";
      return ncclSystemError;
    } catch (const std::exception& e) {
      message = std::string("internal error: ") + e.what();
      return ncclInternalError;
    } catch (...) {
      message = "internal error: unknown exception";
      return ncclInternalError;
    }
  } catch (...) {
    return ncclInternalError;  // assigning the message threw (out of memory)
  }
}

}  // namespace metronome::testbed::standin
