#include "endpoint.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "metronome/common/clock.hpp"
#include "registry.hpp"

namespace metronome::service {

namespace {

constexpr size_t kMaxBatch = 4096;  // messages handled before the tick

}  // namespace

Endpoint::Endpoint(const ServiceConfig& config, Metrics& metrics, Registry& registry)
    : config_(config), metrics_(metrics), registry_(registry) {}

Endpoint::~Endpoint() {
  Stop();
}

void Endpoint::Bind() {
  context_ = std::make_unique<zmq::context_t>(1);
  socket_ = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::router);
  socket_->set(zmq::sockopt::router_mandatory, 1);
  socket_->set(zmq::sockopt::linger, 0);
  socket_->set(zmq::sockopt::sndhwm, 10'000);
  // Thousands of shims reconnect at once after a restart: a short accept queue would drop their
  // SYNs and delay them by seconds of TCP retransmission.
  socket_->set(zmq::sockopt::backlog, 4096);
  socket_->set(zmq::sockopt::rcvhwm, 100);  // per peer: backpressure, bounded memory
  // Frames above this drop the connection inside libzmq; up to it, oversized frames reach the
  // decoder, which rejects (and counts) anything above proto::kMaxMessageBytes.
  socket_->set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);
  if (config_.curve.Enabled()) {
    const std::string secret =
        ReadCurveKeyFile("curve.secret_key_file", config_.curve.secret_key_file);
    const std::string pub =
        ReadCurveKeyFile("curve.public_key_file", config_.curve.public_key_file);
    char derived[41] = {};
    if (zmq_curve_public(derived, secret.c_str()) != 0) {
      throw ConfigError("curve.secret_key_file", "is not a valid Z85 CURVE secret key");
    }
    if (pub != derived) {
      throw ConfigError("curve.public_key_file", "does not match the secret key");
    }
    socket_->set(zmq::sockopt::curve_server, 1);
    socket_->set(zmq::sockopt::curve_secretkey, secret);
    spdlog::info("zmq: CURVE enabled, server public key {}", pub);
  }
  try {
    socket_->bind(config_.listen);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("zmq: cannot bind " + config_.listen + ": " + e.what());
  }
  bound_endpoint_ = socket_->get(zmq::sockopt::last_endpoint);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error("scheduler: eventfd failed");
}

void Endpoint::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "mtr-endpoint");  // names show in top -H, perf, gdb
    Loop();
  });
}

void Endpoint::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
  socket_.reset();
  context_.reset();
}

void Endpoint::Wake() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void Endpoint::Loop() {
  const int64_t tick_ns = config_.controller.tick_ms * 1'000'000;
  int64_t next_tick = RealtimeNs() + tick_ns;
  std::vector<zmq::pollitem_t> items = {{socket_->handle(), 0, ZMQ_POLLIN, 0},
                                        {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  std::vector<zmq::message_t> parts;
  std::vector<std::string> frames;
  while (!stopping_) {
    const int64_t now0 = RealtimeNs();
    const auto wait_ms = std::clamp<int64_t>((next_tick - now0) / 1'000'000, 0, 50);
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(wait_ms));
    if ((items[1].revents & ZMQ_POLLIN) != 0) {
      uint64_t n = 0;
      (void)!::read(wake_fd_, &n, sizeof n);
    }
    for (size_t i = 0; i < kMaxBatch; ++i) {
      parts.clear();
      zmq::recv_result_t got;
      try {
        got = zmq::recv_multipart(*socket_, std::back_inserter(parts), zmq::recv_flags::dontwait);
      } catch (const zmq::error_t& e) {
        spdlog::warn("zmq: receive failed: {}", e.what());
        break;
      }
      if (!got) break;
      const int64_t t_recv = RealtimeNs();
      frames.clear();
      for (auto& p : parts) frames.emplace_back(static_cast<const char*>(p.data()), p.size());
      registry_.Handle(frames, t_recv);
      Flush();  // the replies (a pong's t3 is "now"), and what a planning round queued
    }
    const int64_t now = RealtimeNs();
    if (now >= next_tick) {
      registry_.Tick(now);
      next_tick = now + tick_ns;
    }
    Flush();
  }
}

void Endpoint::Flush() {
  for (const Outgoing& o : registry_.TakeOutbox()) {
    try {
      const auto a = socket_->send(zmq::buffer(o.identity),
                                   zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      const auto b = a ? socket_->send(zmq::buffer(o.payload), zmq::send_flags::dontwait)
                       : zmq::send_result_t{};
      if (!a || !b) {
        metrics_.SendFailed("queue_full").Increment();
        continue;
      }
      metrics_.Sent(o.type).Increment();
    } catch (const zmq::error_t& e) {
      metrics_.SendFailed(e.num() == EHOSTUNREACH ? "peer_gone" : "error").Increment();
    }
  }
}

}  // namespace metronome::service
