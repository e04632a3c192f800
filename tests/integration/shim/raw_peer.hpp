// A raw scheduler for the shim's integration tests: a ZeroMQ ROUTER that answers hello with
// welcome and ping with pong, records profile reports, and lets a test push anything (valid or
// not) to every shim that said hello, from its `tick`, called every millisecond.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "metronome/common/clock.hpp"
#include "metronome/common/protocol.hpp"

namespace metronome::shim {

namespace proto = metronome::proto;
using namespace std::chrono_literals;

// A raw scheduler: answers hello and ping, and lets the test push whatever it likes.
class RawPeer {
 public:
  explicit RawPeer(std::string endpoint = "tcp://127.0.0.1:*", const char* curve_secret = nullptr)
      : sock_(ctx_, zmq::socket_type::router) {
    sock_.set(zmq::sockopt::linger, 0);
    if (curve_secret != nullptr) {
      sock_.set(zmq::sockopt::curve_server, 1);
      sock_.set(zmq::sockopt::curve_secretkey, std::string(curve_secret));
    }
    sock_.bind(endpoint);
    endpoint_ = sock_.get(zmq::sockopt::last_endpoint);
  }
  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  ~RawPeer() { Stop(); }

  void Stop() {
    if (stop_.exchange(true)) return;
    if (thread_.joinable()) thread_.join();
    sock_.close();
  }

  const std::string& Endpoint() const { return endpoint_; }
  int Hellos() const { return hellos_.load(); }
  int Pings() const { return pings_.load(); }
  uint32_t HelloFeatures() const { return hello_features_.load(); }  // of the latest hello
  std::string JobId() {
    std::lock_guard<std::mutex> l(mu_);
    return job_id_;
  }

  // Called from the peer thread every millisecond once a shim said hello.
  std::function<void(RawPeer&)> tick;
  // What its welcomes announce (protocol Feature bits); set before Start.
  uint32_t welcome_features = 0;
  // The phase edges the shims sent, in order.
  std::vector<proto::PhaseEdge> Edges() {
    std::lock_guard<std::mutex> l(mu_);
    return edges_;
  }

  // To every shim that said hello (peer thread only).
  void SendRaw(const std::string& bytes) {
    for (const std::string& id : identities_) {
      sock_.send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      sock_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
    }
  }
  void SendFrames(const std::string& a, const std::string& b) {
    for (const std::string& id : identities_) {
      sock_.send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      sock_.send(zmq::buffer(a), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      sock_.send(zmq::buffer(b), zmq::send_flags::dontwait);
    }
  }
  // The latest profile report of each rank.
  std::map<uint32_t, proto::ProfileReport> Reports() {
    std::lock_guard<std::mutex> l(mu_);
    return reports_;
  }
  void Send(const proto::Message& m) { SendRaw(proto::Encode(m)); }

 private:
  void Run() {
    while (!stop_.load()) {
      zmq::pollitem_t item{static_cast<void*>(sock_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, 1ms);
      zmq::message_t id;
      while (sock_.recv(id, zmq::recv_flags::dontwait)) {
        zmq::message_t body;
        if (!sock_.recv(body, zmq::recv_flags::dontwait)) break;
        const std::string identity(static_cast<const char*>(id.data()), id.size());
        const proto::Decoded d = proto::Decode(body.data(), body.size());
        if (!d.Ok()) continue;
        if (const auto* r = std::get_if<proto::ProfileReport>(&d.message)) {
          std::lock_guard<std::mutex> l(mu_);
          reports_[r->rank] = *r;
        }
        if (const auto* e = std::get_if<proto::PhaseEdge>(&d.message)) {
          std::lock_guard<std::mutex> l(mu_);
          edges_.push_back(*e);
        }
        if (const auto* h = std::get_if<proto::Hello>(&d.message)) {
          if (std::find(identities_.begin(), identities_.end(), identity) == identities_.end()) {
            identities_.push_back(identity);
          }
          {
            std::lock_guard<std::mutex> l(mu_);
            job_id_ = h->job_id;
          }
          hello_features_.store(h->features);
          hellos_.fetch_add(1);
          Reply(identity, proto::Welcome{42, 200, RealtimeNs(), welcome_features});
        } else if (const auto* p = std::get_if<proto::ClockPing>(&d.message)) {
          pings_.fetch_add(1);
          const int64_t t = RealtimeNs();
          Reply(identity, proto::ClockPong{p->seq, p->t1_ns, t, t});
        }
      }
      if (tick && hellos_.load() > 0) tick(*this);
    }
  }

  void Reply(const std::string& id, const proto::Message& m) {
    const std::string bytes = proto::Encode(m);
    sock_.send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    sock_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  }

  zmq::context_t ctx_;
  zmq::socket_t sock_;
  std::string endpoint_;
  std::vector<std::string> identities_;
  std::map<uint32_t, proto::ProfileReport> reports_;
  std::vector<proto::PhaseEdge> edges_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> hellos_{0};
  std::atomic<int> pings_{0};
  std::atomic<uint32_t> hello_features_{0};
  std::mutex mu_;
  std::string job_id_;
};

// A partner's phase edges, as a test that plays the scheduler of a job taking turns relays them:
// the test sets when the partner begins and ends (scheduler clock), and Tick, from the peer's
// thread, sends each once the clock reaches it.
struct PartnerEdges {
  explicit PartnerEdges(uint64_t partner_id) : partner(partner_id) {}
  void Tick(RawPeer& p) {
    const int64_t now = RealtimeNs();
    if (begin_at.load() != begun && now >= begin_at.load()) {
      begun = begin_at.load();
      p.Send(proto::TurnEdge{p.JobId(), partner, true, begun});
    }
    if (end_at.load() != ended && now >= end_at.load()) {
      ended = end_at.load();
      p.Send(proto::TurnEdge{p.JobId(), partner, false, ended});
    }
  }
  const uint64_t partner;
  std::atomic<int64_t> begin_at{0};
  std::atomic<int64_t> end_at{0};
  int64_t begun = 0;  // the peer thread's: what it sent last
  int64_t ended = 0;
};

}  // namespace metronome::shim
