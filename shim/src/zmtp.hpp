// ZMTP 3.0 (https://rfc.zeromq.org/spec/23/) for a DEALER client with the NULL mechanism, without
// I/O: the frames it writes and the reader of what its peer sends. zmtp_transport.cpp moves the
// bytes; the fuzz target and the tests drive the reader directly.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <utility>

#include "metronome/common/protocol.hpp"

namespace metronome::shim::zmtp {

// The largest frame body accepted (a protocol message and room for a command's properties).
inline constexpr size_t kMaxBody = proto::kMaxMessageBytes + 1024;
// Complete messages the reader keeps before dropping new ones (the caller reads them every loop).
inline constexpr size_t kMaxQueued = 1000;

std::string Greeting();                      // 64 octets, NULL mechanism, as client
std::string ReadyCommand(const char* type);  // READY with Socket-Type
std::string Frame(const std::string& body, bool more, bool command);
// Parses one frame at the start of `buf`: returns its total length (0 = incomplete, -1 = bad),
// and fills flags and body.
long ParseFrame(std::string_view buf, size_t max_body, bool& more, bool& command,
                std::string& body);

// What the peer sends, as the bytes arrive in any pieces: its greeting (ZMTP 3 or later, NULL
// mechanism), commands (READY once, ERROR, PING answered with a PONG, others ignored) and
// messages (a multi-part one keeps its first frame and says it had more).
class Reader {
 public:
  // False when the peer broke the protocol: the connection must be dropped. Messages completed
  // before stay readable.
  bool Feed(const char* data, size_t n);
  bool Ready() const { return ready_; }  // READY received
  bool HasMessage() const { return !queue_.empty(); }
  bool Pop(std::string& out, bool& multipart);
  // What to send the peer (PONG frames), handed over once.
  std::string TakeReplies() { return std::exchange(replies_, std::string()); }
  // A new connection: its greeting again. Unread messages stay.
  void Reset();

 private:
  bool Parse();
  bool HandleCommand(const std::string& body);

  std::string in_;
  std::string partial_;  // the first frame of a message whose last has not come
  std::string replies_;
  int parts_ = 0;
  bool greeted_ = false;
  bool ready_ = false;
  std::deque<std::pair<std::string, bool>> queue_;
};

}  // namespace metronome::shim::zmtp
