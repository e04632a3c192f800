// libFuzzer target for the wire-protocol decoder. Properties checked on every input:
// Decode() returns (never throws, never reads out of bounds: ASan), a rejection carries a
// reason, and anything accepted is a valid message that survives its own round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "metronome/common/protocol.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace metronome::proto;
  const Decoded d = Decode(data, size);
  if (!d.Ok()) {
    if (d.detail.empty()) {
      std::abort();
    }
    return 0;
  }
  const std::string once = Encode(d.message);
  const Decoded again = Decode(once);
  if (!again.Ok() || Encode(again.message) != once) std::abort();
  return 0;
}
