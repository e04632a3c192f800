// The scheduler connection through libzmq (opened at run time): a DEALER, used for CURVE.
#include <cstring>
#include <vector>

#include "config.hpp"
#include "log.hpp"
#include "metronome/common/protocol.hpp"
#include "transport.hpp"
#include "zmq_api.hpp"

namespace metronome::shim {
namespace {

class ZmqTransport final : public Transport {
 public:
  ZmqTransport() { rx_.resize(proto::kMaxMessageBytes + 1); }

  bool Open(const Config& c) override {
    zmq_ = LoadZmq();
    if (zmq_ == nullptr) return false;
    ctx_ = zmq_->ctx_new();
    if (ctx_ == nullptr) return false;
    zmq_->ctx_set(ctx_, ZMQ_IO_THREADS, 1);
    sock_ = zmq_->socket(ctx_, ZMQ_DEALER);
    if (sock_ == nullptr) {
      MLOG_ERROR("cannot create a ZeroMQ socket: %s", zmq_->strerror(zmq_->errno_value()));
      return false;
    }
    const int zero = 0;
    const int one = 1;
    const int sndhwm = 100;
    const int rcvhwm = 1000;
    const int reconnect = 100;
    const int reconnect_max = 1000;
    const int64_t max_msg = static_cast<int64_t>(proto::kMaxMessageBytes);
    zmq_->setsockopt(sock_, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_->setsockopt(sock_, ZMQ_IMMEDIATE, &one, sizeof(one));
    zmq_->setsockopt(sock_, ZMQ_SNDHWM, &sndhwm, sizeof(sndhwm));
    zmq_->setsockopt(sock_, ZMQ_RCVHWM, &rcvhwm, sizeof(rcvhwm));
    zmq_->setsockopt(sock_, ZMQ_RECONNECT_IVL, &reconnect, sizeof(reconnect));
    zmq_->setsockopt(sock_, ZMQ_RECONNECT_IVL_MAX, &reconnect_max, sizeof(reconnect_max));
    zmq_->setsockopt(sock_, ZMQ_MAXMSGSIZE, &max_msg, sizeof(max_msg));
    const std::string& server_key = c.curve_server_key;
    if (!server_key.empty()) {
      // The scheduler runs CURVE: encrypt with an ephemeral key pair of our own.
      char pub[41] = {};
      char sec[41] = {};
      if (zmq_->curve_keypair == nullptr || zmq_->curve_keypair(pub, sec) != 0 ||
          zmq_->setsockopt(sock_, ZMQ_CURVE_SERVERKEY, server_key.c_str(), 40) != 0 ||
          zmq_->setsockopt(sock_, ZMQ_CURVE_PUBLICKEY, pub, 40) != 0 ||
          zmq_->setsockopt(sock_, ZMQ_CURVE_SECRETKEY, sec, 40) != 0) {
        MLOG_ERROR("METRONOME_CURVE_SERVERKEY is set but CURVE cannot be used: %s",
                   zmq_->strerror(zmq_->errno_value()));
        return false;
      }
    }
    if (zmq_->connect(sock_, c.scheduler.c_str()) != 0) {
      MLOG_ERROR("cannot connect to METRONOME_SCHEDULER=%s: %s", c.scheduler.c_str(),
                 zmq_->strerror(zmq_->errno_value()));
      return false;
    }
    std::snprintf(describe_, sizeof(describe_), "libzmq%s (%s)",
                  server_key.empty() ? "" : " with CURVE", zmq_->path);
    return true;
  }

  void Wait(long timeout_ms, int wake_fd) override {
    zmq_pollitem_t items[2] = {};
    items[0].socket = sock_;
    items[0].events = ZMQ_POLLIN;
    items[1].fd = wake_fd;
    items[1].events = ZMQ_POLLIN;
    zmq_->poll(items, wake_fd >= 0 ? 2 : 1, timeout_ms);
  }

  void Service(int64_t) override {}

  bool Receive(std::string& out, bool& multipart) override {
    const int n = zmq_->recv(sock_, rx_.data(), rx_.size(), ZMQ_DONTWAIT);
    if (n < 0) return false;
    int more = 0;
    size_t more_size = sizeof(more);
    zmq_->getsockopt(sock_, ZMQ_RCVMORE, &more, &more_size);
    multipart = more != 0;
    while (more != 0) {  // discard the rest of a multi-frame message
      char scratch[64];
      if (zmq_->recv(sock_, scratch, sizeof(scratch), ZMQ_DONTWAIT) < 0) break;
      more_size = sizeof(more);
      zmq_->getsockopt(sock_, ZMQ_RCVMORE, &more, &more_size);
    }
    // Longer than the buffer: zmq_recv truncated it; keep one byte too many so it is rejected.
    out.assign(rx_.data(), std::min(static_cast<size_t>(n), rx_.size()));
    return true;
  }

  bool Send(const std::string& bytes) override {
    return zmq_->send(sock_, bytes.data(), bytes.size(), ZMQ_DONTWAIT) >= 0;
  }

  void Close(int linger_ms) override {
    if (sock_ != nullptr) {
      zmq_->setsockopt(sock_, ZMQ_LINGER, &linger_ms, sizeof(linger_ms));
      zmq_->close(sock_);
    }
    if (ctx_ != nullptr) zmq_->ctx_term(ctx_);
    sock_ = nullptr;
    ctx_ = nullptr;
  }

  const char* Describe() const override { return describe_; }

 private:
  const ZmqApi* zmq_ = nullptr;
  void* ctx_ = nullptr;
  void* sock_ = nullptr;
  std::vector<char> rx_;
  char describe_[600] = "libzmq";
};

}  // namespace

std::unique_ptr<Transport> MakeZmqTransport() {
  return std::make_unique<ZmqTransport>();
}

}  // namespace metronome::shim
