// libFuzzer target for the shim's ZMTP reader (shim/src/zmtp.hpp): whatever a peer sends. The
// first byte picks where the input is cut into two pieces; properties checked on every input:
// Feed() returns (never throws, never reads out of bounds: ASan), the verdict and the messages
// are the same whole and in pieces, no message exceeds kMaxBody, and every reply is complete
// PONG frames.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "log.hpp"
#include "zmtp.hpp"

namespace {

namespace zmtp = metronome::shim::zmtp;

struct Outcome {
  bool ok = true;
  std::vector<std::pair<std::string, bool>> messages;
  std::string replies;
};

Outcome Read(const char* data, size_t size, size_t cut) {
  zmtp::Reader r;
  Outcome o;
  o.ok = r.Feed(data, cut);
  if (o.ok) o.ok = r.Feed(data + cut, size - cut);  // a dropped connection reads no further
  o.replies = r.TakeReplies();
  std::string m;
  bool multipart = false;
  while (r.Pop(m, multipart)) o.messages.emplace_back(m, multipart);
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  metronome::shim::SetLogLevel(metronome::shim::LogLevel::kOff);  // an ERROR command logs a line
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char* bytes = reinterpret_cast<const char*>(data + 1);
  const size_t n = size - 1;
  const size_t cut = n == 0 ? 0 : data[0] % (n + 1);
  const Outcome whole = Read(bytes, n, n);
  const Outcome pieces = Read(bytes, n, cut);
  if (whole.ok != pieces.ok || whole.messages != pieces.messages) std::abort();
  for (const auto& m : whole.messages) {
    if (m.first.size() > zmtp::kMaxBody) std::abort();
  }
  // Replies: PONG commands only, each a whole frame.
  std::string_view rest = whole.replies;
  while (!rest.empty()) {
    bool more = false;
    bool command = false;
    std::string body;
    const long used = zmtp::ParseFrame(rest, zmtp::kMaxBody, more, command, body);
    if (used <= 0 || !command || more || body.compare(0, 5, "\x04PONG") != 0) std::abort();
    rest.remove_prefix(static_cast<size_t>(used));
  }
  return 0;
}
