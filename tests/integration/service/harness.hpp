// Test harness for the scheduler's integration tests: a metronome-scheduler process on free
// loopback ports, protocol clients (a ZeroMQ DEALER speaking the msgpack protocol, with an
// optionally skewed clock), and HTTP helpers.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "metronome/common/clock.hpp"
#include "metronome/common/protocol.hpp"

extern char** environ;

namespace metronome::testing {

using nlohmann::json;
namespace proto = metronome::proto;

// A TCP port that was free a moment ago (the kernel's pick for port 0); throws when the kernel
// gives none.
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("FreePort: socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  const int port = ntohs(a.sin_port);
  ::close(fd);
  if (!ok) throw std::runtime_error("FreePort: no free loopback port");
  return port;
}

// This test program's directory for configs and logs: made on first use, removed when every
// test passed, kept (its path printed) for reading when one failed.
inline const std::string& ScratchDir() {
  static const std::string kDir = [] {
    std::string t = "/tmp/metronome-svc-test-XXXXXX";
    if (::mkdtemp(t.data()) == nullptr) throw std::runtime_error("ScratchDir: mkdtemp failed");
    return t;
  }();
  return kDir;
}

class ScratchCleanup : public ::testing::Environment {
 public:
  static inline bool used = false;
  void TearDown() override {
    if (!used) return;
    if (::testing::UnitTest::GetInstance()->Passed()) {
      std::error_code ec;
      std::filesystem::remove_all(ScratchDir(), ec);
    } else {
      std::fprintf(stderr, "the tests' configs and logs are kept in %s\n", ScratchDir().c_str());
    }
  }
};
inline ::testing::Environment* const kScratchCleanup =
    ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

inline std::string TempPath(const std::string& name) {
  ScratchCleanup::used = true;
  return ScratchDir() + "/" + name;
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A topology file of two racks (r0: n0, n1; r1: n2, n3; 25 Gbit/s node links, 10 Gbit/s rack
// uplinks); returns its path.
inline std::string TwoRackTopology(const std::string& name) {
  std::string path = TempPath(name);
  WriteFile(path,
            "racks:\n"
            "  - {name: r0, uplink_gbps: 10, nodes: [{name: n0, nic_gbps: 25}, {name: n1, "
            "nic_gbps: 25}]}\n"
            "  - {name: r1, uplink_gbps: 10, nodes: [{name: n2, nic_gbps: 25}, {name: n3, "
            "nic_gbps: 25}]}\n");
  return path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a program; its stdout and stderr go to a log file.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& log) : log_(log) {
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Process() { Kill(SIGKILL); }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Sends `sig` and waits, at most 30 s (then SIGKILL: a process that does not stop is a
  // failure with its log, not a test that hangs until ctest's timeout); returns the exit code
  // (128+signal when killed), -1 if not running, -2 if it had to be killed after `sig`.
  int Kill(int sig = SIGTERM) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    for (int i = 0; i < 3000 && sig != SIGKILL; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (sig == SIGKILL) return Wait();
    ::kill(pid_, SIGKILL);
    Wait();
    return -2;
  }
  int Wait() {
    if (pid_ <= 0) return -1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    return ::waitpid(pid_, &status, WNOHANG) == 0;
  }
  std::string Log() const { return ReadFile(log_); }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

// Runs a program to completion and returns (exit code, output).
inline std::pair<int, std::string> RunToEnd(const std::vector<std::string>& argv,
                                            const std::string& name) {
  const std::string log = TempPath(name + ".log");
  Process p(argv, log);
  const int rc = p.Wait();
  return {rc, ReadFile(log)};
}

inline std::optional<json> HttpGetJson(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(5, 0);
  auto r = c.Get(path.c_str());
  if (!r || r->status != 200) return std::nullopt;
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

inline std::string HttpGetText(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2, 0);
  auto r = c.Get(path.c_str());
  return r ? r->body : "";
}

// The value of one Prometheus sample (exact series text before the value), or -1.
inline double MetricValue(const std::string& exposition, const std::string& series) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// Sum of every sample of a family (lines starting with `family{` or `family `).
inline double MetricSum(const std::string& exposition, const std::string& family) {
  std::istringstream in(exposition);
  std::string line;
  double sum = 0;
  while (std::getline(in, line)) {
    if (line.rfind(family + "{", 0) == 0 || line.rfind(family + " ", 0) == 0) {
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return sum;
}

inline bool WaitFor(const std::function<bool()>& pred, int timeout_ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// metronome-scheduler on free loopback ports.
class Scheduler {
 public:
  explicit Scheduler(std::vector<std::string> extra = {}, int zmq_port = 0, int http_port = 0)
      : zmq_port_(zmq_port ? zmq_port : FreePort()),
        http_port_(http_port ? http_port : FreePort()),
        extra_(std::move(extra)) {
    Start();
  }
  void Start() {
    std::vector<std::string> argv = {METRONOME_SCHEDULER_BIN, "--listen", Endpoint(), "--http",
                                     "127.0.0.1:" + std::to_string(http_port_)};
    argv.insert(argv.end(), extra_.begin(), extra_.end());
    proc_ = std::make_unique<Process>(argv, TempPath("scheduler-" + std::to_string(zmq_port_) +
                                                     "-" + std::to_string(starts_++) + ".log"));
    ready_ = WaitFor([&] { return HttpGetJson(http_port_, "/healthz").has_value(); }, 10000);
  }
  int Stop() { return Kill(SIGTERM); }
  int Kill(int sig) { return proc_ ? proc_->Kill(sig) : -1; }
  bool Ready() const { return ready_; }
  std::string Endpoint() const { return "tcp://127.0.0.1:" + std::to_string(zmq_port_); }
  int HttpPort() const { return http_port_; }
  std::string Metrics() const { return HttpGetText(http_port_, "/metrics"); }
  std::optional<json> Get(const std::string& path) const { return HttpGetJson(http_port_, path); }
  std::string Log() const { return proc_ ? proc_->Log() : ""; }

 private:
  int zmq_port_;
  int http_port_;
  std::vector<std::string> extra_;
  std::unique_ptr<Process> proc_;
  int starts_ = 0;
  bool ready_ = false;
};

// A shim stand-in: one DEALER speaking the protocol, its clock skewed by `skew_ns`.
class ProtoClient {
 public:
  explicit ProtoClient(zmq::context_t& ctx, const std::string& endpoint, int64_t skew_ns = 0,
                       const std::string& curve_server_key = "")
      : socket_(ctx, zmq::socket_type::dealer), skew_ns_(skew_ns) {
    socket_.set(zmq::sockopt::linger, 0);
    if (!curve_server_key.empty()) {
      char pub[41] = {}, sec[41] = {};
      zmq_curve_keypair(pub, sec);
      socket_.set(zmq::sockopt::curve_serverkey, curve_server_key);
      socket_.set(zmq::sockopt::curve_publickey, std::string(pub));
      socket_.set(zmq::sockopt::curve_secretkey, std::string(sec));
    }
    socket_.connect(endpoint);
  }

  int64_t Now() const { return RealtimeNs() + skew_ns_; }  // this client's (skewed) clock

  void SendRaw(const std::string& bytes) {
    socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
  }
  void SendFrames(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      socket_.send(zmq::buffer(frames[i]),
                   i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  void Send(const proto::Message& m) { SendRaw(proto::Encode(m)); }

  // The next message (decoded), or nullopt after `timeout_ms`.
  std::optional<proto::Message> Recv(int timeout_ms = 2000) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) <= 0) return std::nullopt;
    zmq::message_t msg;
    if (!socket_.recv(msg, zmq::recv_flags::dontwait)) return std::nullopt;
    last_recv_ns = Now();
    auto d = proto::Decode(msg.data(), msg.size());
    if (!d.Ok()) return std::nullopt;
    return d.message;
  }

  // Waits for a message of type T, keeping others (timetables) in view.
  template <typename T>
  std::optional<T> Expect(int timeout_ms = 2000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end) {
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            end - std::chrono::steady_clock::now())
                                            .count());
      auto m = Recv(std::max(left, 1));
      if (!m) return std::nullopt;
      Note(*m);
      if (auto* t = std::get_if<T>(&*m)) return *t;
    }
    return std::nullopt;
  }

  // Drains what is queued, remembering timetables and errors.
  void Poll(int timeout_ms = 0) {
    while (auto m = Recv(timeout_ms)) Note(*m);
  }

  proto::Hello MakeHello(const std::string& job, uint32_t rank, uint32_t world,
                         const std::string& node, int32_t priority = 1, uint32_t features = 0) {
    proto::Hello h;
    h.job_id = job;
    h.rank = rank;
    h.world_size = world;
    h.node = node;
    h.priority = priority;
    h.pid = static_cast<uint32_t>(::getpid());
    h.shim_version = "test";
    h.features = features;
    return h;
  }

  std::optional<proto::Welcome> Register(const std::string& job, uint32_t rank, uint32_t world,
                                         const std::string& node, int32_t priority = 1,
                                         uint32_t features = 0) {
    Send(MakeHello(job, rank, world, node, priority, features));
    return Expect<proto::Welcome>();
  }

  proto::ProfileReport MakeReport(const std::string& job, uint32_t rank, int64_t period_ns,
                                  int64_t comm_ns, std::vector<int64_t> starts = {}) {
    proto::ProfileReport r;
    r.job_id = job;
    r.rank = rank;
    r.iterations = ++iterations_;
    r.period_ns = period_ns;
    r.comm_ns = comm_ns;
    r.confidence = 0.9;
    r.timetable_version = timetable ? timetable->version : 0;
    r.phase_starts_ns = std::move(starts);
    return r;
  }

  std::optional<Timetable> timetable;
  YieldSet yields;  // the latest push's
  std::vector<proto::Error> errors;
  int64_t last_recv_ns = 0;

 private:
  void Note(const proto::Message& m) {
    if (auto* p = std::get_if<proto::TimetablePush>(&m)) {
      timetable = p->timetable;
      yields = p->yields;
    }
    if (auto* e = std::get_if<proto::Error>(&m)) errors.push_back(*e);
  }

  zmq::socket_t socket_;
  int64_t skew_ns_;
  uint64_t iterations_ = 0;
};

}  // namespace metronome::testing
