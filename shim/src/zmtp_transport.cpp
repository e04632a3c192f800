// The built-in transport: ZMTP 3.0 as a DEALER client with the NULL mechanism over one
// non-blocking socket (zmtp.hpp reads and writes the protocol; this moves the bytes).
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

#include "config.hpp"
#include "log.hpp"
#include "metronome/common/clock.hpp"
#include "metronome/common/errno_text.hpp"
#include "metronome/common/protocol.hpp"
#include "transport.hpp"
#include "zmtp.hpp"

namespace metronome::shim {

namespace {

constexpr size_t kMaxOut = size_t{256} * 1024;

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
    if (reader_.HasMessage()) timeout_ms = 0;
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
    if (const char* why = ReadSome()) return Fail(now, why);
    if (state_ == State::kGreeting && reader_.Ready()) {
      state_ = State::kReady;
      backoff_ns_ = 0;
      MLOG_DEBUG("connected to the scheduler at %s", endpoint_.c_str());
    }
    const std::string replies = reader_.TakeReplies();
    // PONGs are owed only to a peer that reads them: one that pings without reading goes.
    if (out_.size() + replies.size() > kMaxOut) return Fail(now, "the peer does not read");
    out_ += replies;
    if (!Flush()) return Fail(now, "write failed");
  }

  bool Receive(std::string& out, bool& multipart) override { return reader_.Pop(out, multipart); }

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
    out_.clear();
    reader_.Reset();
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
    out_.clear();
    reader_.Reset();
  }

  bool Flush() {
    while (!out_.empty() && fd_ >= 0) {
      const ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      out_.erase(0, static_cast<size_t>(n));
    }
    return true;
  }

  // Reads what has arrived into the reader: nullptr, or why the connection must go.
  const char* ReadSome() {
    char buf[16384];
    for (int i = 0; i < 64; ++i) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        if (!reader_.Feed(buf, static_cast<size_t>(n))) return "protocol error";
        continue;
      }
      if (n == 0) return "connection closed";
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return nullptr;
      return "connection closed";
    }
    return nullptr;
  }

  std::string endpoint_;
  std::string host_;
  std::string port_;
  std::string ipc_path_;
  int fd_ = -1;
  State state_ = State::kIdle;
  int64_t next_attempt_ns_ = 0;
  int64_t backoff_ns_ = 0;
  std::string out_;
  zmtp::Reader reader_;
};

}  // namespace

std::unique_ptr<Transport> MakeZmtpTransport() {
  return std::make_unique<ZmtpTransport>();
}

}  // namespace metronome::shim
