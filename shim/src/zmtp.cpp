// The ZMTP 3.0 codec and reader (zmtp.hpp).
#include "zmtp.hpp"

#include <cstdint>
#include <cstring>

#include "log.hpp"

namespace metronome::shim::zmtp {

std::string Greeting() {
  std::string g(64, '\0');
  g[0] = static_cast<char>(0xff);
  g[9] = 0x7f;
  g[10] = 3;  // version 3.0
  g[11] = 0;
  std::memcpy(&g[12], "NULL", 4);  // mechanism, zero-padded to 20 octets
  g[32] = 0;                       // as-server: no
  return g;
}

std::string Frame(const std::string& body, bool more, bool command) {
  std::string f;
  unsigned char flags = (more ? 0x01 : 0) | (command ? 0x04 : 0);
  if (body.size() > 255) {
    flags |= 0x02;
    f.push_back(static_cast<char>(flags));
    const uint64_t n = body.size();
    for (int i = 7; i >= 0; --i) f.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  } else {
    f.push_back(static_cast<char>(flags));
    f.push_back(static_cast<char>(body.size()));
  }
  f += body;
  return f;
}

std::string ReadyCommand(const char* type) {
  std::string body;
  body.push_back(5);
  body += "READY";
  const std::string name = "Socket-Type";
  body.push_back(static_cast<char>(name.size()));
  body += name;
  const uint32_t n = static_cast<uint32_t>(std::strlen(type));
  for (int i = 3; i >= 0; --i) body.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  body += type;
  return Frame(body, false, true);
}

long ParseFrame(std::string_view buf, size_t max_body, bool& more, bool& command,
                std::string& body) {
  if (buf.size() < 2) return 0;
  const auto flags = static_cast<unsigned char>(buf[0]);
  if (flags & 0xf8) return -1;  // reserved bits
  more = (flags & 0x01) != 0;
  command = (flags & 0x04) != 0;
  size_t header = 2;
  uint64_t size = static_cast<unsigned char>(buf[1]);
  if (flags & 0x02) {
    if (buf.size() < 9) return 0;
    header = 9;
    size = 0;
    for (int i = 1; i <= 8; ++i) {
      size = (size << 8) | static_cast<unsigned char>(buf[static_cast<size_t>(i)]);
    }
  }
  if (size > max_body) return -1;
  if (buf.size() < header + size) return 0;
  body.assign(buf.substr(header, size));
  return static_cast<long>(header + size);
}

bool Reader::Feed(const char* data, size_t n) {
  in_.append(data, n);
  if (in_.size() > 4 * kMaxBody) return false;
  return Parse();
}

bool Reader::Pop(std::string& out, bool& multipart) {
  if (queue_.empty()) return false;
  out.swap(queue_.front().first);
  multipart = queue_.front().second;
  queue_.pop_front();
  return true;
}

void Reader::Reset() {
  in_.clear();
  partial_.clear();
  replies_.clear();
  parts_ = 0;
  greeted_ = false;
  ready_ = false;
}

bool Reader::Parse() {
  if (!greeted_) {
    if (in_.size() < 64) {
      // Check what is there early: a peer that does not speak ZMTP 3 is dropped at once.
      return in_.empty() || static_cast<unsigned char>(in_[0]) == 0xff;
    }
    if (static_cast<unsigned char>(in_[0]) != 0xff || in_[9] != 0x7f || in_[10] < 3 ||
        std::memcmp(&in_[12], "NULL", 4) != 0 || in_[16] != 0) {
      return false;
    }
    in_.erase(0, 64);
    greeted_ = true;
  }
  size_t at = 0;  // frames are consumed from the front; erased once at the end
  bool ok = true;
  for (;;) {
    bool more = false;
    bool command = false;
    std::string body;
    const long used = ParseFrame(std::string_view(in_).substr(at), kMaxBody, more, command, body);
    if (used <= 0) {
      ok = used == 0;
      break;
    }
    at += static_cast<size_t>(used);
    if (command) {
      if (!HandleCommand(body)) {
        ok = false;
        break;
      }
      continue;
    }
    if (!ready_) {  // data before READY
      ok = false;
      break;
    }
    if (parts_ == 0) partial_ = std::move(body);  // later frames only mark it multi-part
    ++parts_;
    if (more) continue;
    if (queue_.size() < kMaxQueued) queue_.emplace_back(std::move(partial_), parts_ > 1);
    partial_.clear();
    parts_ = 0;
  }
  in_.erase(0, at);
  return ok;
}

bool Reader::HandleCommand(const std::string& body) {
  if (body.empty()) return false;
  const size_t name_len = static_cast<unsigned char>(body[0]);
  if (body.size() < 1 + name_len) return false;
  const std::string name = body.substr(1, name_len);
  if (name == "READY") {
    if (ready_) return false;
    ready_ = true;
    return true;
  }
  if (name == "ERROR") {
    const std::string reason = body.size() > 2 + name_len ? body.substr(2 + name_len) : "";
    MLOG_WARN("the scheduler refused the connection: %s", reason.c_str());
    return false;
  }
  if (name == "PING" && ready_) {
    // PING: TTL (2 octets) then a context of up to 16 octets, echoed in the PONG.
    std::string pong;
    pong.push_back(4);
    pong += "PONG";
    if (body.size() > 1 + name_len + 2) pong += body.substr(1 + name_len + 2, 16);
    replies_ += Frame(pong, false, true);
    return true;
  }
  return true;  // other commands (PONG, SUBSCRIBE...) mean nothing to a DEALER
}

}  // namespace metronome::shim::zmtp
