// A scheduler for the GPU checks, in a thread of the check program: a ZeroMQ ROUTER that answers
// Hello with Welcome and ClockPing with ClockPong (its clock is this host's CLOCK_REALTIME, so the
// shim's offset to it is ~0), and pushes one timetable to every job that said hello, at once and
// then every 500 ms. The shim keeps the highest version it saw, so a new timetable needs a new
// version (SetTimetable bumps it). With EnableTurns it also announces turns, pushes every job a
// turn set once, relays the partner's edges that the check schedules (at their time, within a
// millisecond), and keeps the phase edges the shims send.
//
// It is the scheduler's side of docs/shim.md's message table and nothing more: no planning, no
// reports kept. libzmq's C API only, so that nvcc compiles it as plain host code.
#pragma once

#include <zmq.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "metronome/common/clock.hpp"
#include "metronome/common/protocol.hpp"

namespace metronome::gpucheck {

class MiniScheduler {
 public:
  MiniScheduler(std::string endpoint, const Timetable& tt)
      : endpoint_(std::move(endpoint)), tt_(tt) {}
  MiniScheduler(const MiniScheduler&) = delete;
  MiniScheduler& operator=(const MiniScheduler&) = delete;
  ~MiniScheduler() { Stop(); }

  // Binds and starts the thread; false (and a message) when the endpoint cannot be bound.
  bool Start() {
    ctx_ = zmq_ctx_new();
    sock_ = zmq_socket(ctx_, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(sock_, ZMQ_LINGER, &zero, sizeof(zero));
    if (zmq_bind(sock_, endpoint_.c_str()) != 0) {
      std::fprintf(stderr, "mini scheduler: bind %s failed: %s\n", endpoint_.c_str(),
                   zmq_strerror(zmq_errno()));
      zmq_close(sock_);
      zmq_ctx_term(ctx_);
      sock_ = ctx_ = nullptr;
      return false;
    }
    thread_ = std::thread([this] { Run(); });
    return true;
  }

  void Stop() {
    if (!thread_.joinable()) return;
    stop_.store(true);
    thread_.join();
    zmq_close(sock_);
    zmq_ctx_term(ctx_);
    sock_ = ctx_ = nullptr;
  }

  // A new timetable for every job, with the next version.
  void SetTimetable(Timetable tt) {
    std::lock_guard<std::mutex> lock(mu_);
    tt.version = tt_.version + 1;
    tt_ = tt;
    dirty_ = true;
  }

  int Hellos() const { return hellos_.load(); }

  // Turns: announced in the welcome; `s` pushed to every job once (it sends its edges).
  void EnableTurns(const TurnSet& s) {
    std::lock_guard<std::mutex> lock(mu_);
    turns_ = s;
    turns_on_ = true;
  }
  // An edge of partner `partner` (the job id the set names), stamped `at_ns` and sent to every
  // job once the clock reaches `at_ns`. Returns at once.
  void ScheduleEdge(uint64_t partner, bool begun, int64_t at_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    scheduled_.push_back({partner, begun, at_ns, 0});
  }
  struct SentEdge {
    uint64_t partner;
    bool begun;
    int64_t at_ns;
    int64_t sent_ns;  // when it went out (0: not yet)
  };
  std::vector<SentEdge> SentEdges() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  // The phase edges the shims sent, with when each arrived.
  std::vector<std::pair<proto::PhaseEdge, int64_t>> Edges() {
    std::lock_guard<std::mutex> lock(mu_);
    return edges_;
  }

 private:
  struct Peer {
    std::string identity;  // the ROUTER's id of the shim's DEALER
    std::string job;
  };

  void Send(const std::string& identity, const std::string& bytes) {
    zmq_send(sock_, identity.data(), identity.size(), ZMQ_SNDMORE);
    zmq_send(sock_, bytes.data(), bytes.size(), 0);
  }

  void Run() {
    char id[256];
    std::vector<char> frame(proto::kMaxMessageBytes + 1);
    int64_t last_push = 0;
    while (!stop_.load()) {
      zmq_pollitem_t item{sock_, 0, ZMQ_POLLIN, 0};
      zmq_poll(&item, 1, TurnsOn() ? 1 : 5);
      while (true) {
        const int n = zmq_recv(sock_, id, sizeof(id), ZMQ_DONTWAIT);
        if (n < 0) break;
        const int m = zmq_recv(sock_, frame.data(), frame.size(), ZMQ_DONTWAIT);
        if (m < 0 || m > static_cast<int>(frame.size())) continue;  // over the size: truncated
        const std::string identity(id, static_cast<size_t>(n));
        proto::Decoded d = proto::Decode(frame.data(), static_cast<size_t>(m));
        if (!d.Ok()) continue;
        if (auto* h = std::get_if<proto::Hello>(&d.message)) {
          bool known = false;
          for (const Peer& p : peers_) {
            known = known || (p.identity == identity && p.job == h->job_id);
          }
          if (!known) peers_.push_back({identity, h->job_id});
          hellos_.fetch_add(1);
          const bool turns = TurnsOn();
          Send(identity, proto::Encode(proto::Welcome{1, 1000, RealtimeNs(),
                                                      turns ? proto::kFeatureTurns : 0u}));
          last_push = 0;  // the new job gets its timetable at once
          if (turns && !known) {
            std::lock_guard<std::mutex> lock(mu_);
            Send(identity, proto::Encode(proto::TurnPush{h->job_id, 1, true, turns_}));
          }
        } else if (auto* p = std::get_if<proto::ClockPing>(&d.message)) {
          const int64_t t = RealtimeNs();
          Send(identity, proto::Encode(proto::ClockPong{p->seq, p->t1_ns, t, t}));
        } else if (auto* e = std::get_if<proto::PhaseEdge>(&d.message)) {
          std::lock_guard<std::mutex> lock(mu_);
          edges_.emplace_back(*e, RealtimeNs());
        }
      }
      const int64_t now = RealtimeNs();
      RelayDue(now);
      bool dirty = false;
      proto::TimetablePush push;
      {
        std::lock_guard<std::mutex> lock(mu_);
        dirty = dirty_;
        dirty_ = false;
        push.timetable = tt_;
      }
      if (peers_.empty() || (!dirty && now - last_push < 500'000'000)) continue;
      last_push = now;
      for (const Peer& p : peers_) {
        push.job_id = p.job;
        Send(p.identity, proto::Encode(push));
      }
    }
  }

  bool TurnsOn() {
    std::lock_guard<std::mutex> lock(mu_);
    return turns_on_;
  }

  void RelayDue(int64_t now) {
    std::lock_guard<std::mutex> lock(mu_);
    for (SentEdge& e : scheduled_) {
      if (e.sent_ns != 0 || e.at_ns > now) continue;
      for (const Peer& p : peers_) {
        Send(p.identity, proto::Encode(proto::TurnEdge{p.job, e.partner, e.begun, e.at_ns}));
      }
      e.sent_ns = RealtimeNs();
      sent_.push_back(e);
    }
    std::erase_if(scheduled_, [](const SentEdge& e) { return e.sent_ns != 0; });
  }

  std::string endpoint_;
  void* ctx_ = nullptr;
  void* sock_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> hellos_{0};
  std::mutex mu_;
  Timetable tt_;
  bool dirty_ = false;
  bool turns_on_ = false;
  TurnSet turns_;
  std::vector<SentEdge> scheduled_;
  std::vector<SentEdge> sent_;
  std::vector<std::pair<proto::PhaseEdge, int64_t>> edges_;
  std::vector<Peer> peers_;  // the thread's own
};

}  // namespace metronome::gpucheck
