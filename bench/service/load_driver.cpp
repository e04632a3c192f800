// service_load_driver: a bounded load test of metronome-scheduler on loopback (not a ctest test).
//
// It starts the scheduler (or uses --endpoint/--http of a running one), then N protocol clients,
// connected as the shims connect (ZMTP 3.0 over non-blocking TCP, with the shim's own framing and
// reader, shim/src/zmtp.hpp; no libzmq threads) and multiplexed with epoll on a few threads,
// grouped into jobs of R ranks on a two-tier topology. Every client registers (hello → welcome),
// pings its clock as a settled shim does (ClockPingIntervalNs: every 2 s) and reports `rate` times
// a second for `duration` seconds; rank 0 of each job reports a profile, which gets the job planned
// and its timetable pushed to all its ranks. At the end it prints:
//   - accounting: hellos sent vs welcomes received vs registrations counted by the scheduler;
//     reports sent vs reports the scheduler counted; errors and rejections (must be 0);
//   - p50/p99/max of registration latency (hello → welcome), timetable push latency (the
//     profile report that made the job plannable → the push at each rank), pong latency;
//     push latency twice: for the start, when every job's first profile lands within one
//     report interval (a burst, as after a scheduler restart), and for the steady state, where
//     `churn` jobs a second leave (bye) and come back as new jobs while the rest keep reporting;
//   - the scheduler's own push latency and planning time (its /metrics histograms), for the
//     whole run and for the steady state alone, which leaves out the driver's own queueing;
//   - the scheduler's CPU use (cores, from /proc/PID/stat), its CPU time per message handled,
//     and resident memory (VmRSS, VmHWM);
//   - with --poll-ms, how long each read of /metrics and the status API took, read in the steady
//     state as Prometheus and a dashboard would (the pushes and pongs must not wait for them):
//     the API's default answers, so the first page of the jobs and the busiest links' timeline.
// Each thread waits for the replies still in flight before the figures are counted.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "metronome/common/clock.hpp"
#include "metronome/common/clock_sync.hpp"
#include "metronome/common/protocol.hpp"
#include "metronome/common/timetable.hpp"
#include "zmtp.hpp"

extern char** environ;

namespace {

namespace proto = metronome::proto;
using metronome::ClockPingIntervalNs;
using metronome::kDefaultSilenceNs;
using metronome::kSettlingPings;
using metronome::RealtimeNs;
using Clock = std::chrono::steady_clock;

struct Options {
  int clients = 2000;
  int rate = 10;  // reports per second per client
  int duration_s = 30;
  int threads = 0;  // 0: one per CPU the driver may run on (taskset)
  int ranks_per_job = 4;
  int racks = 64;  // the two-tier topology the scheduler it starts plans on
  int nodes_per_rack = 8;
  int ranks_per_node = 1;  // consecutive ranks of a job share a node (GPUs per node)
  int churn = 10;          // jobs replaced per second in the steady state
  bool spread = false;     // each job's ranks on different racks (rack uplinks shared)
  // As the shims share a node by default: one connection per job per node (its lowest rank)
  // speaks for the job's ranks there; --clients still counts ranks.
  bool node_share = false;
  int Connections() const { return node_share ? clients / ranks_per_node : clients; }
  bool one_link = false;  // the scheduler on its embedded one-link topology (every job shares it)
  std::string endpoint;   // empty: start our own scheduler
  std::string http;
  std::string scheduler = METRONOME_SCHEDULER_BIN;
  int scheduler_cpu = -1;  // >= 0: the scheduler we start runs on this CPU only
  int poll_ms = 0;         // > 0: read the status API and /metrics this often in the steady state
};

int64_t MonoNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// A connection as a shim's (zmtp_transport.cpp): the greeting and READY first, then, once the
// scheduler's READY came, one frame a message (libzmq drops a peer whose messages come before
// its handshake is done; a shim sends nothing until then); what the kernel did not take waits in
// `out` (EPOLLOUT), what arrives goes through the shim's ZMTP reader (which also answers the
// server's heartbeats).
struct Conn {
  int fd = -1;
  metronome::shim::zmtp::Reader reader;
  std::string held;  // frames sent before the handshake was done
  std::string out;
  bool want_out = false;  // EPOLLOUT registered
  bool broken = false;
};

struct Client {
  Conn conn;
  std::string job;
  uint32_t rank = 0;
  std::string node;
  int64_t hello_sent = 0;
  bool welcomed = false;
  int64_t next_report = 0;
  int64_t next_ping = 0;
  uint64_t iterations = 0;
  uint64_t timetable_version = 0;
  metronome::Timetable timetable;
  // The first push after its job's profile (its plan) reached it. A job not planned yet may be
  // pushed before that: the higher windows on its links to yield to (reason "observe").
  bool plan_seen = false;
  int64_t ping_sent = 0;
};

struct Job {
  std::vector<size_t> ranks;  // indices into the thread's clients
  int64_t profile_sent = 0;   // when rank 0 first reported a profile (monotonic)
  int generation = 0;         // times it left and came back as a new job
};

struct Stats {
  uint64_t hellos = 0, welcomes = 0, reports = 0, pings = 0, pongs = 0, pushes = 0, errors = 0;
  uint64_t byes = 0, send_failures = 0;
  std::vector<double> register_ms, push_ms, churn_push_ms, pong_ms;
  void Merge(const Stats& o) {
    hellos += o.hellos;
    welcomes += o.welcomes;
    reports += o.reports;
    pings += o.pings;
    pongs += o.pongs;
    pushes += o.pushes;
    errors += o.errors;
    byes += o.byes;
    send_failures += o.send_failures;
    register_ms.insert(register_ms.end(), o.register_ms.begin(), o.register_ms.end());
    push_ms.insert(push_ms.end(), o.push_ms.begin(), o.push_ms.end());
    churn_push_ms.insert(churn_push_ms.end(), o.churn_push_ms.begin(), o.churn_push_ms.end());
    pong_ms.insert(pong_ms.end(), o.pong_ms.begin(), o.pong_ms.end());
  }
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// snprintf into a std::string (GCC 12 warns falsely about short literal + to_string
// concatenations).
template <typename... A>
std::string Name(const char* fmt, A... args) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// A tcp://HOST:PORT endpoint as an IPv4 address; throws when it is not one.
sockaddr_in ParseTcpEndpoint(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  if (endpoint.rfind("tcp://", 0) != 0 || colon == std::string::npos || colon < 6) {
    throw std::runtime_error("endpoint: expected tcp://HOST:PORT, got " + endpoint);
  }
  const std::string host = endpoint.substr(6, colon - 6);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), endpoint.substr(colon + 1).c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    throw std::runtime_error("endpoint: cannot resolve " + endpoint);
  }
  sockaddr_in a{};
  std::memcpy(&a, found->ai_addr, sizeof a);
  ::freeaddrinfo(found);
  return a;
}

// Loopback connections from one address to one port are bounded by the ephemeral port range
// (about 28,000): past 16,384 clients each block of 16,384 connects from its own loopback
// source address (127.0.1.K), as many nodes would. "": the kernel's choice.
std::string SourceAddress(const sockaddr_in& to, int client, int clients) {
  constexpr int kPerSource = 16384;
  if (clients <= kPerSource || (ntohl(to.sin_addr.s_addr) >> 24) != 127) return "";
  return Name("127.0.1.%d", 1 + client / kPerSource);
}

// A non-blocking connect, its greeting and READY queued; throws when the socket cannot be made.
void Connect(Conn& c, const sockaddr_in& to, const std::string& source) {
  c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!source.empty()) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    if (::bind(c.fd, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0) {
      throw std::runtime_error("bind " + source + ": " + std::strerror(errno));
    }
  }
  if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 &&
      errno != EINPROGRESS) {
    throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
  }
  c.out = metronome::shim::zmtp::Greeting() + metronome::shim::zmtp::ReadyCommand("DEALER");
}

// Writes what is pending; false when the connection broke.
bool Flush(Conn& c) {
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
    } else if (n < 0 &&
               (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOTCONN || errno == EINTR)) {
      return true;  // the rest when the socket is writable (or connected)
    } else {
      c.broken = true;
      return false;
    }
  }
  return true;
}

// As libzmq's send high-water mark of 1,000 messages would: a connection that has this much
// unsent refuses more (counted as a send failure).
constexpr size_t kMaxPendingBytes = 1 << 20;

bool SendMsg(Conn& c, const proto::Message& m) {
  if (c.broken || c.out.size() + c.held.size() > kMaxPendingBytes) return false;
  (c.reader.Ready() ? c.out : c.held) +=
      metronome::shim::zmtp::Frame(proto::Encode(m), false, false);
  return Flush(c);
}

// One thread: a share of the jobs (all ranks of a job live on the same thread).
void RunThread(const Options& o, const sockaddr_in& endpoint, int first_job, int jobs,
               int64_t start_ns, int64_t end_ns, std::atomic<int>& welcomed_total,
               std::atomic<int>& steady_threads, Stats& stats) {
  std::vector<Client> clients;
  std::vector<Job> job_list(jobs);
  for (int j = 0; j < jobs; ++j) {
    const int job_id = first_job + j;
    for (int r = 0; r < o.ranks_per_job; ++r) {
      if (o.node_share && r % o.ranks_per_node != 0) continue;  // a follower: sends nothing
      const int global = job_id * o.ranks_per_job + r;
      Client c;
      Connect(c.conn, endpoint, SourceAddress(endpoint, global, o.clients));
      c.job = Name("load-%d", job_id);
      c.rank = static_cast<uint32_t>(r);
      // Ranks of a job on consecutive nodes (ranks_per_node to a node, racks of
      // nodes_per_rack): its traffic stays under one rack switch. Spread: ranks nodes /
      // ranks-per-job apart (4 ranks of the 512-node default: on racks 16 apart), so every job
      // crosses rack uplinks, each shared by dozens of jobs of different periods.
      const int nodes = o.racks * o.nodes_per_rack;
      const int stride = std::max(1, nodes / o.ranks_per_job);
      const int node =
          o.spread ? (r * stride + job_id) % nodes : (global / o.ranks_per_node) % nodes;
      c.node = Name("r%dn%d", node / o.nodes_per_rack, node % o.nodes_per_rack);
      job_list[j].ranks.push_back(clients.size());
      clients.push_back(std::move(c));
    }
  }
  std::map<std::string, size_t> job_index;
  for (int j = 0; j < jobs; ++j) job_index[Name("load-%d", first_job + j)] = j;

  auto hello = [&](Client& c) {
    proto::Hello h;
    h.job_id = c.job;
    h.rank = c.rank;
    h.world_size = static_cast<uint32_t>(o.ranks_per_job);
    h.node = c.node;
    h.priority = static_cast<int32_t>(std::hash<std::string>{}(c.job) % 3);
    h.pid = static_cast<uint32_t>(::getpid());
    h.shim_version = "load";
    c.hello_sent = MonoNs();
    if (!SendMsg(c.conn, h)) ++stats.send_failures;
    ++stats.hellos;
  };
  for (auto& c : clients) hello(c);
  const int64_t interval = 1'000'000'000 / o.rate;
  // The shim's pings once its clock estimate has settled, at its default silence bound.
  const int64_t ping_interval = ClockPingIntervalNs(kSettlingPings, kDefaultSilenceNs);
  for (size_t i = 0; i < clients.size(); ++i) {
    // Stagger the reports evenly over one interval.
    clients[i].next_report =
        start_ns + static_cast<int64_t>(i) * interval / static_cast<int64_t>(clients.size());
    clients[i].next_ping =
        start_ns + interval / 2 +
        static_cast<int64_t>(i) * ping_interval / static_cast<int64_t>(clients.size());
  }
  // Readiness through epoll on each connection (level-triggered: in, and out while bytes wait).
  const int ep = epoll_create1(0);
  // Reports fall due every 1/(rate x clients) s, below epoll's millisecond timeout: a timerfd
  // armed at the next due time wakes the thread instead (rounding the wait down to 0 ms would
  // spin the client threads and starve the scheduler on a small machine).
  const int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  constexpr uint64_t kTimerTag = UINT64_MAX;
  {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTimerTag;
    epoll_ctl(ep, EPOLL_CTL_ADD, timer, &ev);
  }
  for (size_t i = 0; i < clients.size(); ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    epoll_ctl(ep, EPOLL_CTL_ADD, clients[i].conn.fd, &ev);
  }
  // EPOLLOUT while a connection has bytes the kernel has not taken yet.
  auto watch_out = [&](size_t i) {
    Conn& c = clients[i].conn;
    const bool want = !c.out.empty() && !c.broken;
    if (want == c.want_out) return;
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.u64 = i;
    epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
    c.want_out = want;
  };
  auto fail = [&](Client& c, const char* why) {
    if (c.conn.broken && c.conn.fd < 0) return;
    c.conn.broken = true;
    ++stats.errors;
    std::fprintf(stderr, "connection of %s/%u: %s\n", c.job.c_str(), c.rank, why);
    epoll_ctl(ep, EPOLL_CTL_DEL, c.conn.fd, nullptr);
    ::close(c.conn.fd);
    c.conn.fd = -1;
  };
  // Reads what arrived (until the socket has no more) and handles every whole message.
  auto drain = [&](Client& c) {
    if (c.conn.fd < 0) return;
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(c.conn.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        if (!c.conn.reader.Feed(buf, static_cast<size_t>(n))) return fail(c, "ZMTP protocol error");
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      return fail(c, n == 0 ? "closed by the scheduler" : std::strerror(errno));
    }
    c.conn.out += c.conn.reader.TakeReplies();  // heartbeat PONGs
    if (c.conn.reader.Ready() && !c.conn.held.empty()) c.conn.out += std::exchange(c.conn.held, {});
    std::string body;
    bool multipart = false;
    while (c.conn.reader.Pop(body, multipart)) {
      const int64_t t = MonoNs();
      const auto d = proto::Decode(body.data(), body.size());
      if (!d.Ok()) {
        ++stats.errors;
        continue;
      }
      if (std::holds_alternative<proto::Welcome>(d.message)) {
        if (!c.welcomed) {
          c.welcomed = true;
          ++stats.welcomes;
          ++welcomed_total;
          stats.register_ms.push_back(static_cast<double>(t - c.hello_sent) * 1e-6);
        }
      } else if (const auto* p = std::get_if<proto::TimetablePush>(&d.message)) {
        ++stats.pushes;
        const Job& job = job_list[job_index[c.job]];
        if (!c.plan_seen && job.profile_sent != 0) {
          c.plan_seen = true;
          (job.generation == 0 ? stats.push_ms : stats.churn_push_ms)
              .push_back(static_cast<double>(t - job.profile_sent) * 1e-6);
        }
        c.timetable_version = p->timetable.version;
        c.timetable = p->timetable;
      } else if (std::holds_alternative<proto::ClockPong>(d.message)) {
        ++stats.pongs;
        stats.pong_ms.push_back(static_cast<double>(t - c.ping_sent) * 1e-6);
      } else if (const auto* e = std::get_if<proto::Error>(&d.message)) {
        ++stats.errors;
        std::fprintf(stderr, "error for %s/%u: %s\n", c.job.c_str(), c.rank, e->message.c_str());
      }
    }
    if (!c.conn.out.empty() && !Flush(c.conn)) fail(c, "send failed");
  };
  // After a send: what the kernel did not take is written when the socket is writable.
  auto sent = [&](size_t i, bool ok) {
    if (!ok && clients[i].conn.broken && clients[i].conn.fd >= 0) fail(clients[i], "send failed");
    watch_out(i);
    return ok;
  };
  for (size_t i = 0; i < clients.size(); ++i) watch_out(i);
  std::vector<epoll_event> events(clients.size() + 1);
  // What epoll reported: the timer, bytes to read, room to write what waits.
  auto handle = [&](int n) {
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kTimerTag) {
        uint64_t expirations = 0;
        (void)!::read(timer, &expirations, sizeof expirations);
        continue;
      }
      const size_t at = events[i].data.u64;
      Client& c = clients[at];
      if ((events[i].events & EPOLLOUT) != 0 && c.conn.fd >= 0 && !Flush(c.conn)) {
        fail(c, "send failed");
      }
      if ((events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) drain(c);
      if (c.conn.fd >= 0) watch_out(at);
    }
  };
  // Churn: from 5 s after the start, once every client of this thread has its first timetable
  // (the start's burst served: thousands of jobs take seconds), this thread replaces one of its
  // jobs every threads/churn seconds, round robin: every rank says bye, then registers again
  // under a new job name and reports a fresh profile.
  const int64_t churn_every =
      o.churn > 0 ? int64_t{1'000'000'000} * o.threads / o.churn : int64_t{0};
  int64_t next_churn = churn_every > 0 ? start_ns + 5'000'000'000 : INT64_MAX;
  size_t churn_job = 0;
  bool burst_served = false;
  size_t report_at = 0;  // the next client due to report (see the send loop)
  size_t ping_at = 0;
  auto replace_job = [&](int j) {
    Job& job = job_list[j];
    ++job.generation;
    const std::string name = Name("load-%d-g%d", first_job + j, job.generation);
    job_index[name] = static_cast<size_t>(j);
    for (const size_t ci : job.ranks) {
      Client& c = clients[ci];
      if (SendMsg(c.conn, proto::Bye{c.job, c.rank, "load churn"})) ++stats.byes;
      c.job = name;
      c.welcomed = false;
      c.timetable_version = 0;
      c.timetable = {};
      c.plan_seen = false;
      hello(c);
      sent(ci, !c.conn.broken);
    }
    job.profile_sent = 0;
  };

  while (true) {
    const int64_t now = MonoNs();
    if (now >= end_ns) break;
    if (now >= next_churn && jobs > 0 && !burst_served) {
      burst_served =
          std::all_of(clients.begin(), clients.end(), [](const Client& c) { return c.plan_seen; });
      if (!burst_served) next_churn = now + 100'000'000;
      if (burst_served) ++steady_threads;
    }
    if (now >= next_churn && jobs > 0 && burst_served) {
      replace_job(static_cast<int>(churn_job++ % static_cast<size_t>(jobs)));
      next_churn += churn_every;
    }
    // Send what is due. Clients fall due in index order (their first reports are staggered by
    // index over one interval, and each report and ping moves its client on by the same step),
    // so a cursor per kind visits only the clients due: a wake-up costs what it sends, not a
    // scan of the thread's clients (wake-ups come as often as messages fall due).
    // A client not yet welcomed skips its turn.
    int64_t next_due = std::min(end_ns, next_churn);
    if (now >= start_ns && !clients.empty()) {
      for (size_t k = 0; k < clients.size() && clients[report_at].next_report <= now; ++k) {
        const size_t at = report_at;
        Client& c = clients[at];
        report_at = report_at + 1 == clients.size() ? 0 : report_at + 1;
        c.next_report += interval;
        if (!c.welcomed) continue;
        proto::ProfileReport r;
        r.job_id = c.job;
        r.rank = c.rank;
        r.iterations = ++c.iterations;
        if (c.rank == 0) {
          r.period_ns = 200'000'000 + static_cast<int64_t>(job_index[c.job] % 5) * 50'000'000;
          r.comm_ns = 20'000'000;
          r.bytes_per_phase = 0;
          r.confidence = 0.9;
          Job& job = job_list[job_index[c.job]];
          if (job.profile_sent == 0) job.profile_sent = MonoNs();
        }
        r.timetable_version = c.timetable_version;
        // Phases run on the windows (as a gated shim's would): the last two openings.
        if (c.timetable_version != 0) {
          const int64_t open = metronome::WindowOpenAtOrBefore(c.timetable, RealtimeNs());
          r.phase_starts_ns = {open - c.timetable.period_ns + 100'000, open + 100'000};
        }
        if (sent(at, SendMsg(c.conn, r))) {
          ++stats.reports;
        } else {
          ++stats.send_failures;
        }
      }
      for (size_t k = 0; k < clients.size() && clients[ping_at].next_ping <= now; ++k) {
        const size_t at = ping_at;
        Client& c = clients[at];
        ping_at = ping_at + 1 == clients.size() ? 0 : ping_at + 1;
        c.next_ping += ping_interval;
        if (!c.welcomed) continue;
        c.ping_sent = MonoNs();
        if (sent(at, SendMsg(c.conn, proto::ClockPing{c.iterations, RealtimeNs()}))) {
          ++stats.pings;
        } else {
          ++stats.send_failures;
        }
      }
      next_due = std::min({next_due, clients[report_at].next_report, clients[ping_at].next_ping});
    } else {
      next_due = start_ns;
    }
    int wait_ms = 0;
    if (next_due > MonoNs()) {
      itimerspec due{};
      due.it_value.tv_sec = static_cast<time_t>(next_due / 1'000'000'000);
      due.it_value.tv_nsec = static_cast<long>(next_due % 1'000'000'000);
      timerfd_settime(timer, TFD_TIMER_ABSTIME, &due, nullptr);
      wait_ms = 5;
    }
    handle(epoll_wait(ep, events.data(), static_cast<int>(events.size()), wait_ms));
  }
  // Replies in flight: every ping's pong and every hello's welcome, for up to 5 s, before the
  // thread's figures are counted.
  const int64_t grace_end = MonoNs() + 5'000'000'000;
  while ((stats.pongs < stats.pings || stats.welcomes < stats.hellos) && MonoNs() < grace_end) {
    handle(epoll_wait(ep, events.data(), static_cast<int>(events.size()), 50));
  }
  for (auto& c : clients) {
    if (c.conn.fd >= 0) ::close(c.conn.fd);
  }
  ::close(timer);
  ::close(ep);
}

struct ProcStat {
  double cpu_s = 0;
  double rss_mib = 0;
  double hwm_mib = 0;
};

ProcStat ReadProc(pid_t pid) {
  ProcStat s;
  std::string text;
  if (std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r")) {
    char buf[4096];
    const size_t n = std::fread(buf, 1, sizeof buf, f);
    text.assign(buf, n);
    std::fclose(f);
  }
  const auto close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream in(text.substr(close + 2));
    std::vector<std::string> f;
    std::string x;
    while (in >> x) f.push_back(x);
    if (f.size() > 13) {
      s.cpu_s = (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_mib = std::stod(line.substr(6)) / 1024.0;
    if (line.rfind("VmHWM:", 0) == 0) s.hwm_mib = std::stod(line.substr(6)) / 1024.0;
  }
  return s;
}

double Metric(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  double sum = 0;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.rfind(series, 0) == 0) {
      sum += std::stod(line.substr(line.rfind(' ') + 1));
      found = true;
    }
  }
  return found ? sum : -1;
}

// A Prometheus histogram's cumulative buckets, (upper bound, count), +Inf last; empty when the
// text has no such family.
using Buckets = std::vector<std::pair<double, double>>;
Buckets ReadBuckets(const std::string& text, const std::string& family) {
  std::istringstream in(text);
  std::string line;
  Buckets buckets;
  const std::string prefix = family + "_bucket{le=\"";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const std::string le =
        line.substr(prefix.size(), line.find('"', prefix.size()) - prefix.size());
    const double bound = le == "+Inf" ? 1e300 : std::stod(le);
    buckets.emplace_back(bound, std::stod(line.substr(line.rfind(' ') + 1)));
  }
  return buckets;
}

// What `later` counted since `earlier` (the same family, read twice).
Buckets Since(Buckets later, const Buckets& earlier) {
  if (earlier.size() != later.size()) return later;
  for (size_t i = 0; i < later.size(); ++i) later[i].second -= earlier[i].second;
  return later;
}

// Quantile q: the upper bound of the first bucket holding q of the samples (so "p99 <= x"), or,
// with `interpolate`, a linear guess inside that bucket as Prometheus' histogram_quantile makes
// it. -1 without samples.
double HistogramQuantile(const Buckets& buckets, double q, bool interpolate = false) {
  if (buckets.empty() || buckets.back().second <= 0) return -1;
  const double rank = q * buckets.back().second;
  double lower = 0, below = 0;
  for (const auto& [bound, count] : buckets) {
    if (count >= rank) {
      if (!interpolate) return bound;
      if (bound > 1e299) return lower;  // past the last bound: the least it can be
      return lower + (bound - lower) * (rank - below) / std::max(count - below, 1e-300);
    }
    lower = bound;
    below = count;
  }
  return -1;
}

// A loopback port the kernel just handed out; throws when it cannot get one.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("FreePort: socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("FreePort: no free loopback port");
  return ntohs(a.sin_port);
}

int Run(int argc, char** argv) {
  Options o;
  CLI::App app{"service_load_driver: metronome-scheduler under reporting clients (bounded)"};
  app.add_option("--clients", o.clients, "ranks, each a protocol client unless --node-share [2000]")
      ->check(CLI::PositiveNumber);
  app.add_option("--rate", o.rate, "reports per second per client [10]")
      ->check(CLI::PositiveNumber);
  app.add_option("--duration", o.duration_s, "seconds of reporting [30]")
      ->check(CLI::Range(1, 3600));
  app.add_option("--threads", o.threads,
                 "client threads [one per CPU it may run on: more than that only switch]")
      ->check(CLI::Range(1, 64));
  app.add_option("--ranks-per-job", o.ranks_per_job, "ranks per job [4]")
      ->check(CLI::PositiveNumber);
  app.add_option("--racks", o.racks, "racks of the two-tier topology [64]")
      ->check(CLI::Range(1, 4096));
  app.add_option("--nodes-per-rack", o.nodes_per_rack, "nodes per rack [8]")
      ->check(CLI::Range(1, 256));
  app.add_option("--ranks-per-node", o.ranks_per_node, "ranks of a job on one node (GPUs) [1]")
      ->check(CLI::Range(1, 64));
  app.add_option("--churn", o.churn, "jobs replaced per second in the steady state [10]")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--spread", o.spread,
               "each job's ranks on different racks (rack uplinks shared by many jobs)");
  app.add_flag("--node-share", o.node_share,
               "one connection per job per node speaks for its ranks there, as the shims share "
               "a node by default (--clients counts ranks)");
  app.add_flag("--one-link", o.one_link,
               "start the scheduler on its embedded defaults: one link that every job crosses");
  app.add_option("--scheduler", o.scheduler, "metronome-scheduler to start");
  app.add_option("--scheduler-cpu", o.scheduler_cpu,
                 "pin the scheduler it starts to this CPU (run the driver itself under taskset "
                 "on the others)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--poll-ms", o.poll_ms,
                 "in the steady state, read /metrics and the status API (status, jobs, links, "
                 "timeline) every this many ms, as Prometheus and a dashboard would [0: once]")
      ->check(CLI::NonNegativeNumber);
  auto* endpoint_opt =
      app.add_option("--endpoint", o.endpoint, "a running scheduler's ZeroMQ endpoint instead");
  auto* http_opt = app.add_option("--http", o.http, "... and its HTTP HOST:PORT");
  endpoint_opt->needs(http_opt);
  http_opt->needs(endpoint_opt);
  CLI11_PARSE(app, argc, argv);
  if (o.threads == 0) {
    // Threads beyond the CPUs it may use only take turns on them: on one core (the scheduler
    // on the other) four client threads and (then) libzmq's I/O threads switched so often that
    // clock pongs waited 44-122 ms at the median, against 16-33 ms for one thread.
    cpu_set_t allowed{};
    sched_getaffinity(0, sizeof allowed, &allowed);
    o.threads = std::clamp(CPU_COUNT(&allowed), 1, 64);
  }
  if (o.clients % o.ranks_per_job != 0) {
    std::fprintf(stderr, "clients must be a positive multiple of ranks-per-job\n");
    return 2;
  }
  if (o.node_share && (o.spread || o.ranks_per_job % o.ranks_per_node != 0)) {
    std::fprintf(stderr,
                 "--node-share needs whole nodes per job (ranks-per-job a multiple of "
                 "ranks-per-node) and no --spread\n");
    return 2;
  }
  // Descriptors: each client holds a TCP socket here, and the scheduler (which inherits this
  // limit) a TCP socket and a little more per client. Raising the hard limit needs
  // CAP_SYS_RESOURCE; without it the clients must fit under the hard limit, or the run fails
  // half-way with "Too many open files".
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  const auto wanted = static_cast<rlim_t>(o.Connections()) * 2 + 1024;
  if (lim.rlim_max < wanted) {
    const rlimit raised{wanted, wanted};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < wanted) {
    std::fprintf(stderr,
                 "%d clients need about %llu file descriptors; this process may open %llu "
                 "(its hard limit: raising it needs CAP_SYS_RESOURCE)\n",
                 o.Connections(), static_cast<unsigned long long>(wanted),
                 static_cast<unsigned long long>(lim.rlim_cur));
    return 2;
  }

  pid_t pid = -1;
  const std::string topo = "/tmp/metronome-load-topology-" + std::to_string(::getpid()) + ".yaml";
  if (o.endpoint.empty()) {
    const int zport = FreePort(), hport = FreePort();
    o.endpoint = "tcp://127.0.0.1:" + std::to_string(zport);
    o.http = "127.0.0.1:" + std::to_string(hport);
    std::ofstream(topo) << "two_tier: {racks: " << o.racks
                        << ", nodes_per_rack: " << o.nodes_per_rack
                        << ", nic_gbps: 100, uplink_gbps: 400}\n";
    const std::string log = "/tmp/metronome-load-scheduler.log";
    std::vector<std::string> args = {o.scheduler, "--listen",    o.endpoint, "--http",
                                     o.http,      "--log-level", "info"};
    if (!o.one_link) {
      args.emplace_back("--topology");
      args.push_back(topo);
    }
    std::vector<char*> argvp;
    argvp.reserve(args.size() + 1);
    for (auto& a : args) argvp.push_back(a.data());
    argvp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    // The child inherits the mask it is spawned with, and every thread it starts inherits that:
    // narrow our own mask around the spawn, before any client thread exists.
    cpu_set_t own{};
    sched_getaffinity(0, sizeof own, &own);
    if (o.scheduler_cpu >= 0) {
      cpu_set_t one{};
      CPU_SET(o.scheduler_cpu, &one);
      if (sched_setaffinity(0, sizeof one, &one) != 0) {
        std::fprintf(stderr, "cannot pin to CPU %d\n", o.scheduler_cpu);
        posix_spawn_file_actions_destroy(&fa);
        return 2;
      }
    }
    const int spawned = posix_spawn(&pid, argvp[0], &fa, nullptr, argvp.data(), environ);
    sched_setaffinity(0, sizeof own, &own);
    posix_spawn_file_actions_destroy(&fa);
    if (spawned != 0) {
      std::fprintf(stderr, "cannot start %s\n", o.scheduler.c_str());
      return 1;
    }
    std::printf("scheduler pid %d on %s, http %s, log %s\n", pid, o.endpoint.c_str(),
                o.http.c_str(), log.c_str());
  }
  const auto colon = o.http.rfind(':');
  httplib::Client http(o.http.substr(0, colon), std::stoi(o.http.substr(colon + 1)));
  http.set_connection_timeout(2, 0);
  http.set_read_timeout(10, 0);
  bool healthy = false;
  for (int i = 0; i < 200 && !(healthy = static_cast<bool>(http.Get("/healthz"))); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  if (!healthy) {
    std::fprintf(stderr, "the scheduler at %s does not answer /healthz\n", o.http.c_str());
    if (pid > 0) ::kill(pid, SIGKILL);
    return 1;
  }

  const sockaddr_in endpoint = ParseTcpEndpoint(o.endpoint);
  const int jobs = o.clients / o.ranks_per_job;
  const int64_t t0 = MonoNs();
  const int64_t start_ns = t0 + 2'000'000'000;  // registration window before the reports
  const int64_t end_ns = start_ns + int64_t{o.duration_s} * 1'000'000'000;
  std::vector<Stats> stats(o.threads);
  std::vector<std::thread> threads;
  std::atomic<int> welcomed{0};
  std::atomic<int> steady_threads{0};  // threads past the start's burst, churning
  const ProcStat at_start = pid > 0 ? ReadProc(pid) : ProcStat{};  // the whole run's CPU
  for (int t = 0; t < o.threads; ++t) {
    const int first = jobs * t / o.threads, last = jobs * (t + 1) / o.threads;
    threads.emplace_back([&, t, first, last] {
      try {
        RunThread(o, endpoint, first, last - first, start_ns, end_ns, welcomed, steady_threads,
                  stats[t]);
      } catch (const std::exception& e) {  // counted, so that the run is not "accounted for"
        std::fprintf(stderr, "client thread %d: %s\n", t, e.what());
        ++stats[t].errors;
      }
    });
  }
  // CPU and memory of the scheduler during the reporting phase only.
  std::this_thread::sleep_for(std::chrono::nanoseconds(start_ns - MonoNs()));
  ProcStat before = pid > 0 ? ReadProc(pid) : ProcStat{};
  const int64_t w0 = MonoNs();
  double rss_max = 0;
  // The scheduler's histograms as the steady state begins (every thread churning), to tell its
  // steady-state latency from the start's burst at the end.
  std::string steady_metrics;
  // --poll-ms: how long each read took (ms), by path.
  const std::vector<std::string> polled = {"/metrics", "/api/v1/status", "/api/v1/jobs",
                                           "/api/v1/links", "/api/v1/timeline"};
  std::map<std::string, std::vector<double>> poll_ms;
  int poll_failures = 0;
  int64_t next_poll = 0;
  while (MonoNs() < end_ns) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(o.poll_ms > 0 ? std::clamp(o.poll_ms / 4, 10, 500) : 500));
    if (pid > 0) rss_max = std::max(rss_max, ReadProc(pid).rss_mib);
    const bool steady = steady_threads >= std::min(o.threads, jobs);
    if (steady_metrics.empty() && steady) {
      auto r = http.Get("/metrics");
      if (r && r->status == 200) steady_metrics = r->body;
      next_poll = MonoNs() + int64_t{o.poll_ms} * 1'000'000;
    } else if (steady && o.poll_ms > 0 && MonoNs() >= next_poll) {
      next_poll = MonoNs() + int64_t{o.poll_ms} * 1'000'000;
      for (const auto& path : polled) {
        const int64_t asked = MonoNs();
        auto r = http.Get(path);
        if (!r || r->status != 200) ++poll_failures;
        poll_ms[path].push_back(static_cast<double>(MonoNs() - asked) * 1e-6);
      }
    }
  }
  ProcStat after = pid > 0 ? ReadProc(pid) : ProcStat{};
  const double wall = static_cast<double>(MonoNs() - w0) * 1e-9;
  for (auto& th : threads) th.join();  // each waits for its replies in flight
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the scheduler counts the last
  const ProcStat at_end = pid > 0 ? ReadProc(pid) : ProcStat{};

  Stats total;
  for (const auto& s : stats) total.Merge(s);
  const int64_t metrics_asked = MonoNs();
  auto m = http.Get("/metrics");
  const std::string metrics = m ? m->body : "";
  if (!m || m->status != 200) {
    std::fprintf(
        stderr, "the scheduler's /metrics: %s after %.1f s (its figures read -1)\n",
        m ? ("HTTP " + std::to_string(m->status)).c_str() : httplib::to_string(m.error()).c_str(),
        static_cast<double>(MonoNs() - metrics_asked) * 1e-9);
  }
  const double sched_reports =
      Metric(metrics, "metronome_messages_received_total{type=\"profile_report\"}");
  const double sched_hellos = Metric(metrics, "metronome_messages_received_total{type=\"hello\"}");
  const double sched_regs = Metric(metrics, "metronome_registrations_total");
  const double sched_byes = Metric(metrics, "metronome_messages_received_total{type=\"bye\"}");
  const double sched_pings =
      Metric(metrics, "metronome_messages_received_total{type=\"clock_ping\"}");
  const double rejected = std::max(0.0, Metric(metrics, "metronome_rejected_messages_total"));
  const double send_failed = std::max(0.0, Metric(metrics, "metronome_send_failures_total"));
  const double planned = Metric(metrics, "metronome_jobs_planned ");

  if (o.node_share) {
    std::printf("\n%d ranks share %d connections: one per job per node (--node-share)", o.clients,
                o.Connections());
  }
  std::printf(
      "\nmetronome-scheduler load: %d clients (%d jobs x %d) on %d threads, %d "
      "reports/s each for %d s, %s %dx%d (%d ranks a node), %s\n",
      o.Connections(), jobs, o.Connections() / jobs, o.threads, o.rate, o.duration_s,
      o.one_link ? "the one-link default; nodes named as in" : "two-tier topology", o.racks,
      o.nodes_per_rack, o.ranks_per_node,
      o.spread ? "jobs across racks (--spread)" : "jobs within racks");
  std::printf("%-34s %12s %12s\n", "accounting", "clients", "scheduler");
  std::printf("%-34s %12llu %12.0f\n", "hellos sent / received",
              static_cast<unsigned long long>(total.hellos), sched_hellos);
  std::printf("%-34s %12llu %12.0f\n", "welcomes received / registrations",
              static_cast<unsigned long long>(total.welcomes), sched_regs);
  std::printf("%-34s %12llu %12.0f\n", "reports sent / received",
              static_cast<unsigned long long>(total.reports), sched_reports);
  std::printf("%-34s %12llu %12.0f\n", "byes sent / received (churn)",
              static_cast<unsigned long long>(total.byes), std::max(0.0, sched_byes));
  std::printf("%-34s %12llu %12.0f\n", "pings sent / received",
              static_cast<unsigned long long>(total.pings), sched_pings);
  std::printf("%-34s %12llu %12s\n", "pongs received", static_cast<unsigned long long>(total.pongs),
              "");
  std::printf("%-34s %12llu %12.0f\n", "errors received / rejected",
              static_cast<unsigned long long>(total.errors), rejected);
  std::printf("%-34s %12llu %12.0f\n", "send failures (client / scheduler)",
              static_cast<unsigned long long>(total.send_failures), send_failed);
  std::printf("%-34s %12llu %12.0f\n", "timetable pushes / jobs planned",
              static_cast<unsigned long long>(total.pushes), planned);
  std::printf("\n%-34s %10s %10s %10s %8s\n", "latency (ms)", "p50", "p99", "max", "n");
  auto row = [](const char* name, const std::vector<double>& v) {
    std::printf("%-34s %10.3f %10.3f %10.3f %8zu\n", name, Percentile(v, 0.5), Percentile(v, 0.99),
                v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()), v.size());
  };
  row("registration (hello -> welcome)", total.register_ms);
  row("push at start (all jobs at once)", total.push_ms);
  row("push in steady state (churn)", total.churn_push_ms);
  row("clock pong (ping -> pong)", total.pong_ms);
  for (const auto& path : polled) {
    const auto it = poll_ms.find(path);
    if (it != poll_ms.end()) row(("read " + path).c_str(), it->second);
  }
  if (poll_failures > 0) std::printf("status API reads that failed: %d\n", poll_failures);
  std::printf("\nscheduler side (its histograms; bucket upper bounds):\n");
  const char* const push_family = "metronome_timetable_push_latency_seconds";
  const char* const round_family = "metronome_plan_duration_seconds";
  auto bound = [&](const char* family, double q) {
    const double v = HistogramQuantile(ReadBuckets(metrics, family), q);
    char buf[32];
    if (v < 0) return std::string("n/a");
    if (v > 1e6) return std::string("> 1000 ms");
    std::snprintf(buf, sizeof buf, "<= %.2f ms", v * 1e3);
    return std::string(buf);
  };
  std::printf("  push latency (report received -> push sent): p50 %s, p99 %s\n",
              bound(push_family, 0.5).c_str(), bound(push_family, 0.99).c_str());
  std::printf("  planner run per batch: p50 %s, p99 %s\n", bound(round_family, 0.5).c_str(),
              bound(round_family, 0.99).c_str());
  const char* const turns_family = "metronome_turns_refresh_seconds";
  const auto count = [](const Buckets& b) { return b.empty() ? 0.0 : b.back().second; };
  std::printf("  turn sets recomputed (holds the registry): p50 %s, p99 %s, %.0f times\n",
              bound(turns_family, 0.5).c_str(), bound(turns_family, 0.99).c_str(),
              count(ReadBuckets(metrics, turns_family)));
  // The same from the steady state's start on, without the driver's own queueing (its one core
  // also runs every client): what the scheduler itself adds.
  if (!steady_metrics.empty()) {
    const auto since_steady = [&](const char* family) {
      return Since(ReadBuckets(metrics, family), ReadBuckets(steady_metrics, family));
    };
    const Buckets pushes = since_steady(push_family);
    const Buckets rounds = since_steady(round_family);
    const auto ms = [](const Buckets& b, double q) {
      const double v = HistogramQuantile(b, q, true);
      char buf[32];
      if (v < 0) return std::string("n/a");  // nothing counted since
      std::snprintf(buf, sizeof buf, "%.1f ms", v * 1e3);
      return std::string(buf);
    };
    const Buckets refreshes = since_steady(turns_family);
    std::printf(
        "  steady state only (interpolated within buckets): push latency p50 %s, p99 %s "
        "(%.0f pushes); planner run p50 %s, p99 %s (%.0f runs); turn sets p50 %s, p99 %s "
        "(%.0f times)\n",
        ms(pushes, 0.5).c_str(), ms(pushes, 0.99).c_str(), count(pushes), ms(rounds, 0.5).c_str(),
        ms(rounds, 0.99).c_str(), count(rounds), ms(refreshes, 0.5).c_str(),
        ms(refreshes, 0.99).c_str(), count(refreshes));
  }
  const bool lossless = total.hellos == total.welcomes && total.pings == total.pongs &&
                        static_cast<double>(total.byes) == std::max(0.0, sched_byes) &&
                        static_cast<double>(total.reports) == sched_reports && total.errors == 0 &&
                        rejected == 0;
  if (pid > 0) {
    std::printf(
        "\nscheduler CPU: %.3f cores (%.2f s over %.1f s)   RSS: %.1f MiB now, %.1f MiB "
        "max sampled, %.1f MiB peak (VmHWM)\n",
        (after.cpu_s - before.cpu_s) / wall, after.cpu_s - before.cpu_s, wall, after.rss_mib,
        rss_max, after.hwm_mib);
    // What carries from machine to machine: the scheduler's CPU per message it handled, in or
    // out, over the whole run (registrations, reports, pings and their pongs, pushes, byes).
    const double messages =
        static_cast<double>(total.hellos + total.reports + total.pings + total.byes +
                            total.welcomes + total.pongs + total.pushes + total.errors);
    std::printf("scheduler CPU per message: %.2f us (%.2f s over %.0f messages in and out)\n",
                (at_end.cpu_s - at_start.cpu_s) * 1e6 / std::max(messages, 1.0),
                at_end.cpu_s - at_start.cpu_s, messages);
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::remove(topo.c_str());
  }
  std::printf("all accounted for: %s\n", lossless ? "yes" : "NO");
  return lossless ? 0 : 1;
}

}  // namespace

// Run's error paths return their exit codes; anything else thrown ends the program here with 1
// (instead of std::terminate).
int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "service_load_driver: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "service_load_driver: unknown exception\n");
  }
  return 1;
}
