// UTF-8 as RFC 3629 defines it: no overlong forms, no surrogates (U+D800..U+DFFF), nothing above
// U+10FFFF. Text that reaches JSON (the status API, the extender's replies, metrics labels) must
// be valid UTF-8, so every decoder of untrusted text checks it with these.
#pragma once

#include <cstddef>
#include <string_view>

namespace metronome {

// The length (1 to 4) of the valid UTF-8 sequence that starts at p[0] (n bytes available, n > 0),
// or 0 when none does.
constexpr std::size_t Utf8SequenceLength(const unsigned char* p, std::size_t n) {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  std::size_t more = 0;
  unsigned char lo = 0x80;  // the second byte's range, narrower after some lead bytes
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    more = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    more = 2;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    more = 3;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (more >= n) return 0;
  if (p[1] < lo || p[1] > hi) return 0;
  for (std::size_t k = 2; k <= more; ++k) {
    if (p[k] < 0x80 || p[k] > 0xBF) return 0;
  }
  return more + 1;
}

inline bool IsUtf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = Utf8SequenceLength(p + i, text.size() - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace metronome
