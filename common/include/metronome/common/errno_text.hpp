// strerror's text for an errno value, thread-safe: strerror may reuse one buffer across threads
// (concurrency-mt-unsafe), strerror_r does not.
#pragma once

#include <cstring>
#include <string>

namespace metronome {

namespace errno_text_detail {
// glibc's GNU strerror_r returns the text (maybe not in buf); the XSI one returns 0 and fills buf.
inline const char* Text(const char* text, const char* /*buf*/) {
  return text;
}
inline const char* Text(int rc, const char* buf) {
  return rc == 0 ? buf : "Unknown error";
}
}  // namespace errno_text_detail

inline std::string ErrnoText(int err) {
  char buf[256] = {};
  return errno_text_detail::Text(strerror_r(err, buf, sizeof(buf)), buf);
}

}  // namespace metronome
