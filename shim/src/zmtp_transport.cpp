// ZMTP 3.0 (https://rfc.zeromq.org/spec/23/) as a DEALER client with the NULL mechanism: the
// greeting, the READY handshake, message frames, and PING/PONG (answered, never sent).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "config.hpp"
#include "log.hpp"
#include "metronome/common/clock.hpp"
#include "metronome/common/errno_text.hpp"
#include "metronome/common/protocol.hpp"
#include "transport.hpp"

namespace metronome::shim {
namespace zmtp {

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

long ParseFrame(const std::string& buf, size_t max_body, bool& more, bool& command,
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
  body.assign(buf, header, size);
  return static_cast<long>(header + size);
}

}  // namespace zmtp

namespace {

constexpr size_t kMaxBody = proto::kMaxMessageBytes + 1024;
constexpr size_t kMaxOut = size_t{256} * 1024;
constexpr size_t kMaxQueued = 1000;

class ZmtpTransport final : public Transport {
 public:
  ~ZmtpTransport() override { Drop(); }

  bool Open(const Config& c) override {
    endpoint_ = c.scheduler;
    if (endpoint_.rfind("tcp://", 0) == 0) {
      const std::string rest = endpoint_.substr(6);
      const size_t colon = rest.rfind(':');
      if (colon == std::string::npos || colon == 0) return Bad("no port");
      host_ = rest.substr(0, colon);
      port_ = rest.substr(colon + 1);
      if (host_.size() > 2 && host_.front() == '[' && host_.back() == ']') {
        host_ = host_.substr(1, host_.size() - 2);
      }
      if (host_ == "*" || port_.empty()) return Bad("needs a host and a port");
    } else if (endpoint_.rfind("ipc://", 0) == 0) {
      ipc_path_ = endpoint_.substr(6);
      if (ipc_path_.empty() || ipc_path_.size() >= sizeof(sockaddr_un{}.sun_path)) {
        return Bad("bad ipc path");
      }
    } else {
      return Bad("only tcp:// and ipc:// are supported");
    }
    next_attempt_ns_ = 0;
    return true;
  }

  void Wait(long timeout_ms, int wake_fd) override {
    pollfd fds[2] = {};
    int n = 0;
    if (wake_fd >= 0) fds[n++] = pollfd{wake_fd, POLLIN, 0};
    if (fd_ >= 0) {
      short events = POLLIN;
      if (state_ == State::kConnecting || !out_.empty()) events |= POLLOUT;
      fds[n++] = pollfd{fd_, events, 0};
    }
    if (!queue_.empty()) timeout_ms = 0;
    if (state_ == State::kIdle) {
      const int64_t until = (next_attempt_ns_ - RealtimeNs()) / 1'000'000;
      timeout_ms = std::clamp<long>(static_cast<long>(until), 0, timeout_ms);
    }
    ::poll(fds, static_cast<nfds_t>(n), static_cast<int>(std::max<long>(0, timeout_ms)));
  }

  void Service(int64_t now) override {
    if (state_ == State::kIdle) {
      if (now >= next_attempt_ns_) StartConnect(now);
      return;
    }
    if (state_ == State::kConnecting) {
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, 0) <= 0) return;
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return Fail(now, ErrnoText(err).c_str());
      state_ = State::kGreeting;
      out_ = zmtp::Greeting() + zmtp::ReadyCommand("DEALER");
    }
    if (!Flush()) return Fail(now, "write failed");
    if (!ReadSome()) return Fail(now, "connection closed");
    if (!Parse()) return Fail(now, "protocol error");
  }

  bool Receive(std::string& out, bool& multipart) override {
    if (queue_.empty()) return false;
    out.swap(queue_.front().first);
    multipart = queue_.front().second;
    queue_.pop_front();
    return true;
  }

  bool Send(const std::string& bytes) override {
    if (state_ != State::kReady || out_.size() + bytes.size() > kMaxOut) return false;
    out_ += zmtp::Frame(bytes, false, false);
    return Flush();
  }

  void Close(int linger_ms) override {
    const int64_t until = RealtimeNs() + int64_t{linger_ms} * 1'000'000;
    while (state_ == State::kReady && !out_.empty() && RealtimeNs() < until) {
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, 10);
      if (!Flush()) break;
    }
    Drop();
  }

  const char* Describe() const override { return "ZMTP 3.0 over TCP (built in)"; }

  void AbandonAfterFork() override {
    if (fd_ >= 0) ::close(fd_);  // the parent keeps its connection; the child's copy goes
    fd_ = -1;
  }

 private:
  enum class State { kIdle, kConnecting, kGreeting, kReady };

  bool Bad(const char* why) {
    MLOG_ERROR("METRONOME_SCHEDULER=%s: %s: running ungated", endpoint_.c_str(), why);
    return false;
  }

  void StartConnect(int64_t now) {
    Drop();
    int fd = -1;
    int rc = -1;
    if (!ipc_path_.empty()) {
      fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::memcpy(a.sun_path, ipc_path_.data(), ipc_path_.size());
      if (fd >= 0) rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    } else {
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* res = nullptr;
      if (getaddrinfo(host_.c_str(), port_.c_str(), &hints, &res) != 0 || res == nullptr) {
        return Fail(now, "cannot resolve the host");
      }
      fd = ::socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    res->ai_protocol);
      if (fd >= 0) {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
      }
      freeaddrinfo(res);
    }
    if (fd < 0) return Fail(now, "no socket");
    fd_ = fd;
    if (rc != 0 && errno != EINPROGRESS) return Fail(now, ErrnoText(errno).c_str());
    state_ = State::kConnecting;
    in_.clear();
    out_.clear();
  }

  void Fail(int64_t now, const char* why) {
    if (state_ == State::kReady) MLOG_DEBUG("scheduler connection lost: %s", why);
    Drop();
    backoff_ns_ =
        backoff_ns_ == 0 ? 100'000'000 : std::min<int64_t>(backoff_ns_ * 2, 1'000'000'000);
    next_attempt_ns_ = now + backoff_ns_;
  }

  void Drop() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    state_ = State::kIdle;
    in_.clear();
    out_.clear();
    greeted_ = false;
  }

  bool Flush() {
    while (!out_.empty() && fd_ >= 0) {
      const ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      out_.erase(0, static_cast<size_t>(n));
    }
    return true;
  }

  bool ReadSome() {
    char buf[16384];
    for (int i = 0; i < 64; ++i) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        in_.append(buf, static_cast<size_t>(n));
        if (in_.size() > 4 * kMaxBody) return false;
        continue;
      }
      if (n == 0) return false;
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
    return true;
  }

  bool Parse() {
    if (state_ == State::kGreeting && !greeted_) {
      if (in_.size() < 64) {
        // Check what is there early: a peer that does not speak ZMTP 3 is dropped at once.
        if (!in_.empty() && static_cast<unsigned char>(in_[0]) != 0xff) return false;
        return true;
      }
      if (static_cast<unsigned char>(in_[0]) != 0xff || in_[9] != 0x7f || in_[10] < 3 ||
          std::memcmp(&in_[12], "NULL", 4) != 0 || in_[16] != 0) {
        return false;
      }
      in_.erase(0, 64);
      greeted_ = true;
    }
    for (;;) {
      bool more = false;
      bool command = false;
      std::string body;
      const long used = zmtp::ParseFrame(in_, kMaxBody, more, command, body);
      if (used < 0) return false;
      if (used == 0) return true;
      in_.erase(0, static_cast<size_t>(used));
      if (command) {
        if (!HandleCommand(body)) return false;
        continue;
      }
      if (state_ != State::kReady) return false;    // data before READY
      if (parts_ == 0) partial_ = std::move(body);  // later frames only mark it multi-part
      ++parts_;
      if (more) continue;
      if (queue_.size() < kMaxQueued) queue_.emplace_back(std::move(partial_), parts_ > 1);
      partial_.clear();
      parts_ = 0;
    }
  }

  bool HandleCommand(const std::string& body) {
    if (body.empty()) return false;
    const size_t name_len = static_cast<unsigned char>(body[0]);
    if (body.size() < 1 + name_len) return false;
    const std::string name = body.substr(1, name_len);
    if (name == "READY") {
      if (state_ != State::kGreeting) return false;
      state_ = State::kReady;
      backoff_ns_ = 0;
      MLOG_DEBUG("connected to the scheduler at %s", endpoint_.c_str());
      return true;
    }
    if (name == "ERROR") {
      const std::string reason = body.size() > 2 + name_len ? body.substr(2 + name_len) : "";
      MLOG_WARN("the scheduler refused the connection: %s", reason.c_str());
      return false;
    }
    if (name == "PING" && state_ == State::kReady) {
      // PING: TTL (2 octets) then a context of up to 16 octets, echoed in the PONG.
      std::string pong;
      pong.push_back(4);
      pong += "PONG";
      if (body.size() > 1 + name_len + 2) pong += body.substr(1 + name_len + 2, 16);
      out_ += zmtp::Frame(pong, false, true);
      return Flush();
    }
    return true;  // other commands (PONG, SUBSCRIBE...) mean nothing to a DEALER
  }

  std::string endpoint_;
  std::string host_;
  std::string port_;
  std::string ipc_path_;
  int fd_ = -1;
  State state_ = State::kIdle;
  bool greeted_ = false;
  int64_t next_attempt_ns_ = 0;
  int64_t backoff_ns_ = 0;
  std::string in_;
  std::string out_;
  std::string partial_;
  int parts_ = 0;
  std::deque<std::pair<std::string, bool>> queue_;
};

}  // namespace

std::unique_ptr<Transport> MakeZmtpTransport() {
  return std::make_unique<ZmtpTransport>();
}

}  // namespace metronome::shim
