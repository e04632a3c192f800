// The device gate against a failing CUDA driver: the shim's core over the libcuda.so.1 stand-in
// (fake_cuda_driver.cpp), one fault per test, each in a forked child (the device gate's state is
// per process) that the parent bounds in time. Every case gates 40 phases against a timetable of
// 2 ms windows every 20 ms and checks that the shim falls back to the next gate (the kernel, then
// stream waits, then the host gate, then observing) with one log line per step down, that no
// collective is held beyond the wait cap, and that no thread is left behind.
#include <cuda.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "device_gate.hpp"
#include "metronome/common/clock.hpp"
#include "metronome/common/protocol.hpp"
#include "raw_peer.hpp"
#include "realtime_shift.hpp"
#include "runtime.hpp"

extern "C" void* MetronomeFakeCudaHostAlloc(int i);  // fake_cuda_driver.cpp
extern "C" void MetronomeFakeCudaFailFromNow(const char* entry);

namespace metronome::shim {
namespace {

constexpr int64_t kCapNs = 50'000'000;  // METRONOME_MAX_WAIT_MS
constexpr int kPhases = 40;

int CountThreads() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// The lines by which the shim says that it gates with less than it tried.
int FallbackLines(const std::string& log) {
  int n = 0;
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t end = log.find('\n', pos);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(pos, end - pos);
    if (line.find("device gate") != std::string::npos &&
        (line.find("unavailable") != std::string::npos ||
         line.find("from now on") != std::string::npos ||
         line.find("does not load") != std::string::npos ||
         line.find("go ungated") != std::string::npos)) {
      ++n;
    }
    pos = end + 1;
  }
  return n;
}

struct Expected {
  DeviceGateStatus status = DeviceGateStatus::kUnavailable;  // the device gate at the end
  bool caller_held = false;                                  // the host gate held some collectives
  bool stream_held = false;  // the device gate held some on their stream
  int fallback_lines = 0;
  int fallbacks = -1;  // DeviceGate::Fallbacks() at the end (-1: not checked)
};

struct Observed {
  int64_t worst_ns = 0;  // from the call to the stream reaching the collective
  int caller_held = 0;
  int stream_held = 0;  // collectives the stream held more than 3 ms
  uint64_t capture_passes = 0;
  int64_t calibration_error_ns = 0;
};

void StampOnStream(void* p) {
  static_cast<std::atomic<int64_t>*>(p)->store(RealtimeNs());
}

// The shim's core as a CUDA process has it (the device gate on auto), talking to `endpoint`, with
// one communicator at `address`: rank 0 of 2.
struct ShimCore {
  Runtime* rt = nullptr;
  ncclComm_t comm = nullptr;
  CommState* st = nullptr;
};
ShimCore StartShim(const std::string& endpoint, uintptr_t address) {
  Config c;
  c.scheduler = endpoint;
  c.max_wait_ns = kCapNs;
  c.gate = GateKind::kAuto;
  c.log_level = LogLevel::kInfo;
  c.node = "test-node";
  c.node_share = false;  // this rank talks to the test's scheduler itself
  ShimCore s;
  s.rt = new Runtime(c);  // leaked on purpose, like the real one
  Runtime::InstallForTesting(s.rt);
  s.comm = reinterpret_cast<ncclComm_t>(address);
  ncclUniqueId id{};
  id.internal[0] = static_cast<char>(address >> 8);
  CommOrigin origin;
  origin.how = "test";
  origin.id = &id;
  origin.nranks = 2;
  origin.rank = 0;
  s.st = s.rt->OnCommCreated(s.comm, origin);
  EXPECT_NE(s.st, nullptr);
  return s;
}

// The child's work: the shim's core with the device gate on, phases through its caller path
// on a stream of the stand-in.
Observed GatePhases() {
  Observed o;
  RawPeer peer;
  peer.tick = [](RawPeer& p) {
    static int64_t last = 0;
    const int64_t now = RealtimeNs();
    if (p.Pings() == 0 || now - last < 100'000'000) return;
    last = now;
    proto::TimetablePush push;
    push.job_id = p.JobId();
    push.timetable = Timetable{1, now, 20'000'000, 0, 2'000'000, 0, 20'000'000};
    p.SendRaw(proto::Encode(push));
  };
  peer.Start();
  CUstream stream = nullptr;
  EXPECT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  const int threads_before = CountThreads();
  {
    const ShimCore shim = StartShim(peer.Endpoint(), 0x7000);
    Runtime* rt = shim.rt;
    ncclComm_t comm = shim.comm;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      auto jobs = rt->Jobs();
      if (!jobs.empty() && jobs.back()->store.Version() >= 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    for (int i = 0; i < kPhases; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(8));
      std::atomic<int64_t> reached{0};
      const int64_t start = RealtimeNs();
      const auto tok = rt->BeforeCollective(comm, Op::kAllReduce, 4096, stream);
      EXPECT_EQ(cuLaunchHostFunc(stream, StampOnStream, &reached), CUDA_SUCCESS);  // "NCCL"
      rt->AfterCollective(tok, ncclSuccess);
      while (reached.load() == 0 && RealtimeNs() - start < 2'000'000'000) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      const int64_t total = reached.load() == 0 ? INT64_MAX : reached.load() - start;
      o.worst_ns = std::max(o.worst_ns, total);
      o.caller_held += tok.hold_ns > 0;
      // Held on the stream: longer than the stand-in's stream thread may take to be scheduled
      // on a loaded machine.
      o.stream_held += total - tok.hold_ns > 3'000'000;
    }
    if (const CommState* st = rt->Find(comm)) o.capture_passes = st->capture_passes.load();
    if (DeviceGate::Status() == DeviceGateStatus::kKernel) {
      o.calibration_error_ns = DeviceGate::HostMinusGpuNs() - 3'600'000'000'000;
    }
    rt->OnCommDestroyed(comm, "destroyed");
    rt->StopClient(1'000'000'000);
  }
  // A joined thread can still be listed for a moment after the join returns (and StopClient
  // gives up waiting after its bound on a loaded machine, sanitizers on): gone within 2 s more.
  const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (CountThreads() != threads_before && std::chrono::steady_clock::now() < gone_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(CountThreads(), threads_before) << "the shim left a thread behind";
  cuStreamDestroy(stream);
  peer.Stop();
  return o;
}

bool InChild() {
  return std::getenv("METRONOME_DRIVER_FAULTS_CHILD") != nullptr;
}

[[noreturn]] void EndChild() {
  std::fflush(nullptr);
  _exit(::testing::Test::HasFailure() ? 1 : 0);
}

// Runs the current test again in a child process, with the stand-in's `faults` and `kernel`,
// bounded to 30 s; the child does the test's work (InChild) and ends with EndChild. The child is
// this test program again, exec'd on the one test (a fork alone would inherit the shim's
// after-fork state, in which the device gate is off). Returns the child's log (the shim's).
std::string RunChild(const char* faults, const char* kernel) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter =
      std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  std::fflush(nullptr);
  char log_path[] = "/tmp/metronome-driver-faults-XXXXXX";
  const int log_fd = mkstemp(log_path);
  EXPECT_GE(log_fd, 0);
  if (log_fd < 0) return "";
  const pid_t child = fork();
  EXPECT_GE(child, 0);
  if (child == 0) {
    setenv("METRONOME_DRIVER_FAULTS_CHILD", "1", 1);
    setenv("METRONOME_FAKE_CUDA_FAIL", faults, 1);
    if (kernel != nullptr) setenv("METRONOME_FAKE_CUDA_KERNEL", kernel, 1);
    dup2(log_fd, 2);  // the shim's log, for the parent to read
    execl("/proc/self/exe", "shim_driver_faults_test", filter.c_str(), "--gtest_brief=1",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  pid_t done = 0;
  while (child > 0 && (done = waitpid(child, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (child > 0 && done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  std::string log;
  char buf[4096];
  ssize_t n = 0;
  lseek(log_fd, 0, SEEK_SET);
  while ((n = read(log_fd, buf, sizeof(buf))) > 0) log.append(buf, static_cast<std::size_t>(n));
  close(log_fd);
  unlink(log_path);
  EXPECT_NE(done, 0) << "the child hung\n" << log;
  if (done != 0) {
    EXPECT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status) << "\n"
                                   << log;
    EXPECT_EQ(WEXITSTATUS(status), 0) << log;
  }
  return log;
}

// Runs one fault in a child process and checks what it saw.
void ExpectFallback(const char* faults, const char* kernel, const Expected& want) {
  if (InChild()) {
    const Observed o = GatePhases();
    std::printf(
        "faults=%s kernel=%s: status=%d worst=%.2f ms caller_held=%d stream_held=%d "
        "capture_passes=%llu calibration_error=%lld ns\n",
        faults, kernel ? kernel : "-", static_cast<int>(DeviceGate::Status()),
        static_cast<double>(o.worst_ns) / 1e6, o.caller_held, o.stream_held,
        static_cast<unsigned long long>(o.capture_passes),
        static_cast<long long>(o.calibration_error_ns));
    EXPECT_EQ(DeviceGate::Status(), want.status);
    EXPECT_LE(o.worst_ns, kCapNs + 40'000'000) << "a collective held beyond the wait cap";
    EXPECT_EQ(o.caller_held > 0, want.caller_held);
    if (want.stream_held) {
      // After a stuck kernel is released, how many of the following phases the stream waits
      // hold varies from run to run (1 to 40 seen; not understood yet); the other device paths
      // hold nearly every phase.
      EXPECT_GE(o.stream_held, kernel != nullptr ? 1 : 5);
    } else {
      EXPECT_LE(o.stream_held, 2);
    }
    if (!want.caller_held && !want.stream_held) {
      EXPECT_GT(o.capture_passes, 0u);
    }
    if (want.fallbacks >= 0) {
      EXPECT_EQ(DeviceGate::Fallbacks(), static_cast<uint64_t>(want.fallbacks));
    }
    if (want.status == DeviceGateStatus::kKernel) {
      // The fake's "GPU timer" runs an hour behind the host clock, so a calibration that is
      // wrong is off by about an hour. Its samples come from a host thread: on a loaded 2-core
      // machine they lag by up to 2 ms (seen under ctest -j3); a GPU's are measured by
      // tests/gpu.
      EXPECT_LT(std::abs(o.calibration_error_ns), 10'000'000) << "timer calibration";
    }
    EndChild();
  }
  const std::string log = RunChild(faults, kernel);
  EXPECT_EQ(FallbackLines(log), want.fallback_lines) << log;
}

TEST(DriverFaults, AWorkingDriverGatesOnTheStreamWithTheKernel) {
  ExpectFallback("", nullptr, {DeviceGateStatus::kKernel, false, true, 0});
}

TEST(DriverFaults, InitFailsHostGate) {
  ExpectFallback("cuInit", nullptr, {DeviceGateStatus::kUnavailable, true, false, 1});
}

TEST(DriverFaults, NoCurrentContextHostGate) {
  ExpectFallback("cuCtxGetCurrent", nullptr, {DeviceGateStatus::kUnavailable, true, false, 1});
}

TEST(DriverFaults, NoHostMappedMemoryHostGate) {
  ExpectFallback("cuMemHostAlloc", nullptr, {DeviceGateStatus::kUnavailable, true, false, 1});
}

TEST(DriverFaults, ModuleLoadFailsStreamWaits) {
  ExpectFallback("cuModuleLoadData", nullptr, {DeviceGateStatus::kWaitValue, false, true, 1});
}

TEST(DriverFaults, KernelLaunchFailsStreamWaits) {
  // The first launch fails: that collective takes the host gate, the rest stream waits.
  ExpectFallback("cuLaunchKernel#2", nullptr, {DeviceGateStatus::kWaitValue, true, true, 1});
}

TEST(DriverFaults, KernelAndStreamWaitsFailHostGate) {
  ExpectFallback("cuLaunchKernel#2,cuStreamWaitValue32", nullptr,
                 {DeviceGateStatus::kUnavailable, true, false, 2});
}

TEST(DriverFaults, CaptureQueryFailsObserves) {
  // Stream waits (no kernel) ask whether the stream is captured; when the driver cannot say,
  // neither the stream nor the caller is held.
  ExpectFallback("cuModuleLoadData,cuStreamIsCapturing", nullptr,
                 {DeviceGateStatus::kWaitValue, false, false, 2});
}

// The calibration's mapped word has no device address (the slots' block, the first, has one):
// its timer kernel must not be launched to write to address 0 (on a GPU a sticky error that ends
// the application's CUDA context; here a crash). Stream waits instead.
TEST(DriverFaults, NoDeviceAddressForTheCalibrationStreamWaits) {
  ExpectFallback("cuMemHostGetDevicePointer#2", nullptr,
                 {DeviceGateStatus::kWaitValue, false, true, 1, 1});
}

// The timer kernel never writes (a GPU too busy to run it beside the host's reads): no offset
// is known, and a gate kernel would aim an hour off. Stream waits instead.
TEST(DriverFaults, ATimerThatCannotBeCalibratedStreamWaits) {
  ExpectFallback("", "notimer", {DeviceGateStatus::kWaitValue, false, true, 1, 1});
}

TEST(DriverFaults, AKernelThatNeverReturnsIsReleasedAndStreamWaitsTakeOver) {
  ExpectFallback("", "hang", {DeviceGateStatus::kWaitValue, false, true, 1});
}

// Taking turns where the calls return once enqueued: a job with an equal partner on its link,
// no gate of its own (an always-open timetable), phases of two collectives on a stream of the
// stand-in.
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kPeriod = 20 * kMs;  // the job's natural period: the longest a turn holds

bool WaitFor(const std::function<bool()>& cond, int64_t within_ns) {
  const int64_t deadline = RealtimeNs() + within_ns;
  while (!cond() && RealtimeNs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return cond();
}

// One phase on the stream: when it was called, when the stream reached its first collective and
// got past its last, and how long the caller was held.
struct Phase {
  int64_t called = 0;
  int64_t held_on_stream = 0;
  int64_t caller_held = 0;
  int64_t first_on_stream = 0;
  int64_t last_done_on_stream = 0;
  int64_t synchronized = 0;
};

// The shim of such a job with its turns in force, and the scheduler it talks to.
struct StreamTurns {
  Runtime* rt = nullptr;
  ncclComm_t comm = nullptr;
  CommState* st = nullptr;
  CUstream stream = nullptr;
  RawPeer* peer = nullptr;
  PartnerEdges* partner = nullptr;

  // Issues one phase of two collectives and waits for the stream to finish it.
  Phase RunPhase() const {
    Phase p;
    std::atomic<int64_t> first{0}, last{0};
    const int64_t start = RealtimeNs();
    p.called = start;
    auto tok = rt->BeforeCollective(comm, Op::kAllReduce, 4096, stream);
    cuLaunchHostFunc(stream, StampOnStream, &first);  // "NCCL"
    rt->AfterCollective(tok, ncclSuccess);
    p.caller_held += tok.hold_ns;
    tok = rt->BeforeCollective(comm, Op::kAllReduce, 4096, stream);
    cuLaunchHostFunc(stream, StampOnStream, &last);
    rt->AfterCollective(tok, ncclSuccess);
    p.caller_held += tok.hold_ns;
    cuStreamSynchronize(stream);
    p.synchronized = RealtimeNs();
    p.first_on_stream = first.load();
    p.last_done_on_stream = last.load();
    p.held_on_stream = first.load() - start;
    std::this_thread::sleep_for(
        std::chrono::milliseconds(10));  // compute: the next call starts a phase
    return p;
  }
  // Whether the partner's begin (or end) at `at` reached the job's turn set.
  bool Seen(bool begun, int64_t at) const {
    return WaitFor(
        [&] {
          TurnSet s;
          return st->job->turns.Read(s) && s.count == 1 &&
                 (begun ? s.partners[0].begun_ns : s.partners[0].ended_ns) == at;
        },
        2'000'000'000);
  }
};

// Starts the shim and its scheduler, teaches the shim its rhythm, waits for the turns to be in
// force, runs `body` and stops them.
void WithStreamTurns(const std::function<void(const StreamTurns&)>& body) {
  PartnerEdges partner(7);
  RawPeer peer;
  peer.welcome_features = proto::kFeatureTurns;
  peer.tick = [&](RawPeer& p) {
    static int64_t last = 0;
    static bool pushed = false;
    const int64_t now = RealtimeNs();
    if (p.Pings() == 0) return;
    if (now - last >= 100 * kMs) {
      last = now;
      proto::TimetablePush push;
      push.job_id = p.JobId();
      push.timetable = Timetable{1, now, kPeriod, 0, kPeriod, 0, kPeriod};
      p.SendRaw(proto::Encode(push));
    }
    if (!pushed) {
      pushed = true;
      proto::TurnPush t{p.JobId(), 1, true, {}};
      t.turns = {5 * kMs, kPeriod, 1, {}};
      // Its compute is long so that it is not taken as quiet (twice its period after its begin)
      // however slowly a loaded machine gets to the phase that waits for it.
      t.turns.partners[0] = {7, false, 6 * kMs, 100 * kMs, 0, 0};
      p.Send(t);
    }
    partner.Tick(p);
  };
  peer.Start();
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
  const ShimCore shim = StartShim(peer.Endpoint(), 0x7100);
  Runtime* rt = shim.rt;
  ncclComm_t comm = shim.comm;
  CommState* st = shim.st;
  ASSERT_NE(st, nullptr);
  ASSERT_TRUE(st->device_gate);
  // Its rhythm, taught through the event ring as the caller's path records it: phases of two
  // 4 KiB collectives every 20 ms.
  const int64_t base = RealtimeNs() - 201 * kPeriod;
  for (int i = 0; i < 200; ++i) {
    for (int k = 0; k < 2; ++k) {
      const int64_t at = base + i * kPeriod + int64_t{k} * 40'000;
      ASSERT_TRUE(st->ring.Push(CollEvent{at, at + 20'000, 0, 4096, 0}));
    }
  }
  JobState* job = st->job;
  ASSERT_TRUE(WaitFor(
      [&] {
        return job->turns.MayTakeTurns() && rt->clock_valid.load() && st->phase_bytes.load() != 0 &&
               !st->observe_only.load();
      },
      5'000'000'000))
      << "no turns in force";
  EXPECT_NE(peer.HelloFeatures() & proto::kFeatureTurns, 0u) << "the shim announced turns";
  body(StreamTurns{rt, comm, st, stream, &peer, &partner});
  rt->OnCommDestroyed(comm, "destroyed");
  rt->StopClient(1'000'000'000);
  cuStreamDestroy(stream);
  peer.Stop();
}

// The gate kernel holds the stream (never the caller) while the partner's relayed turn lasts,
// and stamps the phase's begin when the stream goes on; the edge kernel after the phase's last
// collective stamps its end; the background thread sends both as the job's edges.
void HoldForAPartnersTurn(const StreamTurns& s) {
  Runtime* rt = s.rt;
  ncclComm_t comm = s.comm;
  CommState* st = s.st;
  CUstream stream = s.stream;
  RawPeer& peer = *s.peer;
  PartnerEdges& partner = *s.partner;
  const auto phase = [&] { return s.RunPhase(); };
  const auto seen = [&](bool begun, int64_t at) { return s.Seen(begun, at); };
  // Whether the kernel held a phase is read from its counters: a loaded machine can be slow to
  // run the stand-in's stream thread, which a wall-clock bound would take for a hold.
  const Phase free = phase();
  EXPECT_EQ(DeviceGate::KernelCounters(st->device_slot).yields, 0u) << "no partner in a phase";

  // An equal in its phase: the stream waits until its end arrives, sent 6 ms after the phase's
  // call.
  const int64_t offset = rt->server_minus_local_ns.load();
  const int64_t b1 = RealtimeNs() + offset;
  partner.begin_at = b1;
  ASSERT_TRUE(seen(true, b1));
  partner.end_at = RealtimeNs() + offset + 6 * kMs;
  Phase held = phase();
  EXPECT_GT(held.held_on_stream, 3 * kMs);
  EXPECT_EQ(held.caller_held, 0) << "the stream waits, not the caller";
  const DeviceGate::Counters k = DeviceGate::KernelCounters(st->device_slot);
  EXPECT_EQ(k.yields, 1u);
  // The stand-in's stream and the scheduler read the same clock. The kernel's own count of its
  // wait starts when the stream thread runs it, which a loaded machine delays: not compared.
  EXPECT_GE(held.first_on_stream, partner.end_at.load())
      << "the stream went on before the partner's end was sent";
  EXPECT_GT(k.turn_wait_ns, 0);
  EXPECT_LT(k.turn_wait_ns, kPeriod) << "held past the end's arrival";
  const Phase after = phase();
  EXPECT_EQ(DeviceGate::KernelCounters(st->device_slot).yields, 1u) << "the partner's phase ended";

  // A phase issued as one group: NCCL launches the group's collectives at its end, so the end
  // edge's kernel waits for the group to end (as ncclGroupEnd has the runtime do).
  {
    ThreadState& ts = Tls();
    ++ts.group_depth;
    for (int i = 0; i < 2; ++i) {
      rt->AfterCollective(rt->BeforeCollective(comm, Op::kAllReduce, 4096, stream), ncclSuccess);
    }
    ASSERT_EQ(ts.n_end_edges, 1) << "the end edge waits for the group's end";
    EXPECT_EQ(ts.end_edges[0].st, st);
    --ts.group_depth;
    Runtime::AfterGroup(ts, ncclSuccess);
    EXPECT_EQ(ts.n_end_edges, 0);
    cuStreamSynchronize(stream);
  }

  // Its own edges: the held phase's begin is when its stream went on (after the partner's end
  // arrived), not when the call was made; its end is when the stream got past the phase's last
  // collective. The edges carry the shim's timer calibration, whose error the test knows (the
  // stand-in's timer is exactly an hour behind; on a loaded machine the error reaches a few ms),
  // and the stand-in's stream thread may be descheduled between two operations (so bounds, not
  // points).
  constexpr int64_t kCalibrationNs = 3 * kMs;  // the slack around the bounds
  const int64_t cal = DeviceGate::HostMinusGpuNs() - 3'600'000'000'000;
  held.called += cal;
  held.first_on_stream += cal;
  held.last_done_on_stream += cal;
  held.synchronized += cal;
  ASSERT_TRUE(WaitFor([&] { return peer.Edges().size() >= 6; }, 2'000'000'000));
  const std::vector<proto::PhaseEdge> edges = peer.Edges();
  bool found = false;
  int64_t last_begin = 0;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const proto::PhaseEdge& e = edges[i];
    if (!e.begun) {
      EXPECT_GE(e.at_ns, last_begin) << "an end before its begin";
      continue;
    }
    last_begin = e.at_ns;
    if (e.at_ns < held.called + offset - kCalibrationNs ||
        e.at_ns > held.first_on_stream + offset + kCalibrationNs) {
      continue;
    }
    found = true;
    EXPECT_GE(e.at_ns, partner.end_at.load() + cal - kCalibrationNs)
        << "stamped before the hold ended";
    ASSERT_LT(i + 1, edges.size());
    EXPECT_FALSE(edges[i + 1].begun);
    EXPECT_GE(edges[i + 1].at_ns, held.last_done_on_stream + offset - kCalibrationNs)
        << "an end stamped before the phase's last collective was done";
    EXPECT_LE(edges[i + 1].at_ns, held.synchronized + offset + kCalibrationNs);
  }
  if (!found) {
    ADD_FAILURE() << "no begin edge at the held phase's start on the stream";
    const int64_t called = held.called + offset;
    const int64_t first = held.first_on_stream + offset;
    std::printf("held phase: called %lld, first on stream %lld (calibration error %lld ns added)\n",
                static_cast<long long>(called), static_cast<long long>(first),
                static_cast<long long>(cal));
    for (const proto::PhaseEdge& e : edges) {
      std::printf("  edge %s at %lld\n", e.begun ? "begun" : "ended",
                  static_cast<long long>(e.at_ns));
    }
  }
  std::printf(
      "turns on the stream: free phase held %.2f ms, held phase %.2f ms (caller %.2f ms), "
      "after it %.2f ms; kernel yields %llu, turn wait %.2f ms; %zu edges\n",
      static_cast<double>(free.held_on_stream) / 1e6,
      static_cast<double>(held.held_on_stream) / 1e6, static_cast<double>(held.caller_held) / 1e6,
      static_cast<double>(after.held_on_stream) / 1e6, static_cast<unsigned long long>(k.yields),
      static_cast<double>(k.turn_wait_ns) / 1e6, edges.size());
}

TEST(DeviceTurns, TheKernelHoldsTheStreamForAPartnersTurnAndStampsTheEdges) {
  if (InChild()) {
    WithStreamTurns(HoldForAPartnersTurn);
    EndChild();
  }
  RunChild("", nullptr);
}

// A context that steps down from the kernels between a phase's begin and its end (here the end
// edge's launch fails) stamps no end: the shim sends one at once, or its partners would hold for
// the phase until they take it as quiet (twice its natural period).
void StepDownInsideAPhase(const StreamTurns& s) {
  auto tok = s.rt->BeforeCollective(s.comm, Op::kAllReduce, 4096, s.stream);  // its begin kernel
  s.rt->AfterCollective(tok, ncclSuccess);
  cuStreamSynchronize(s.stream);
  const auto last_edge = [&](bool begun) {
    const std::vector<proto::PhaseEdge> edges = s.peer->Edges();
    return !edges.empty() && edges.back().begun == begun;
  };
  ASSERT_TRUE(WaitFor([&] { return last_edge(true); }, 2'000'000'000)) << "no begin sent";
  const int64_t begun = s.peer->Edges().back().at_ns;
  MetronomeFakeCudaFailFromNow("cuLaunchKernel");
  tok = s.rt->BeforeCollective(s.comm, Op::kAllReduce, 4096, s.stream);
  s.rt->AfterCollective(tok, ncclSuccess);  // completes the phase: its end kernel fails
  cuStreamSynchronize(s.stream);
  EXPECT_EQ(DeviceGate::Status(), DeviceGateStatus::kWaitValue);
  ASSERT_TRUE(WaitFor([&] { return last_edge(false); }, 2'000'000'000))
      << "the phase's begin was left open";
  EXPECT_GE(s.peer->Edges().back().at_ns, begun);
}

TEST(DeviceTurns, AStepDownInsideAPhaseSendsItsEnd) {
  if (InChild()) {
    WithStreamTurns(StepDownInsideAPhase);
    EndChild();
  }
  RunChild("", nullptr);
}

// The device gate's slots as the stand-in's GPU sees them (its first mapped block).
DeviceGateSlot* Slots() {
  return static_cast<DeviceGateSlot*>(MetronomeFakeCudaHostAlloc(0));
}

// Every writer of a slot's sequence locks takes the gate's lock, and writes only while the
// communicator it writes for still holds the slot: a list of communicators taken before a
// destroy and a create must not put one job's timetable into another communicator's slot, and
// two writers must not interleave their increments (a lock left odd fails every kernel open).
TEST(DeviceGateSlots, OneWriterAtATimeAndOnlyTheSlotsOwner) {
  if (InChild()) {
    uint64_t first = 0;
    const int slot = DeviceGate::Prepare(nullptr, kCapNs, first);
    ASSERT_GE(slot, 0);
    ASSERT_NE(Slots(), nullptr);
    DeviceGateSlot& g = Slots()[slot];
    g.waits = 3;  // what the first holder's kernels counted
    g.failed_open = 2;
    g.yields = 1;
    DeviceGate::ReleaseSlot(slot);
    uint64_t second = 0;
    ASSERT_EQ(DeviceGate::Prepare(nullptr, kCapNs, second), slot) << "the slot is handed out again";
    EXPECT_NE(second, first);
    const DeviceGate::Counters fresh = DeviceGate::KernelCounters(slot);
    EXPECT_EQ(fresh.waits + fresh.failed_open + fresh.yields, 0u)
        << "the next holder reports the last one's counts";
    const Timetable tt{1, RealtimeNs(), 20'000'000, 0, 2'000'000, 0, 20'000'000};
    TurnSet turns{5'000'000, 20'000'000, 1, {}};
    turns.partners[0] = {7, false, 6'000'000, 100'000'000, 0, 0};
    DeviceGate::Publish(slot, first, &tt, YieldSet{}, kCapNs);
    DeviceGate::PublishTurns(slot, first, &turns, kCapNs);
    EXPECT_EQ(g.valid, 0u) << "a released owner's timetable reached the slot";
    EXPECT_EQ(g.turn_count, 0u) << "a released owner's turns reached the slot";
    int64_t begun = 0;
    int64_t ended = 0;
    EXPECT_FALSE(DeviceGate::Edges(slot, first, begun, ended));
    DeviceGate::Publish(slot, second, &tt, YieldSet{}, kCapNs);
    EXPECT_EQ(g.valid, 1u);
    EXPECT_TRUE(DeviceGate::Edges(slot, second, begun, ended));

    // The creating thread publishes while the background thread moves the clock offset.
    const uint32_t seq = g.seq;
    constexpr uint32_t kWrites = 200'000;
    std::atomic<bool> go{false};
    std::thread offsets([&] {
      while (!go.load()) {
      }
      for (uint32_t i = 0; i < kWrites; ++i) DeviceGate::SetServerMinusLocal(i);
    });
    go.store(true);
    for (uint32_t i = 0; i < kWrites; ++i) {
      DeviceGate::Publish(slot, second, &tt, YieldSet{}, kCapNs);
    }
    offsets.join();
    EXPECT_EQ(g.seq, seq + 4 * kWrites) << "writers interleaved on the sequence lock";
    EXPECT_EQ(g.seq % 2, 0u);
    EndChild();
  }
  RunChild("", nullptr);
}

// The caller's path never waits for the gate's lock: here a communicator's set-up holds it for
// the first calibration of a timer that never answers (its 200 ms bound), and the capture query
// of another thread's collective answers meanwhile (it is resolved before that calibration).
TEST(DeviceGateSlots, TheCaptureQueryDoesNotWaitForACalibration) {
  if (InChild()) {
    std::atomic<bool> prepared{false};
    std::thread setup([&] {
      uint64_t owner = 0;
      DeviceGate::Prepare(nullptr, kCapNs, owner);
      prepared.store(true);
    });
    // The slots are allocated under the lock, before the context's calibration.
    while (Slots() == nullptr) std::this_thread::yield();
    CUstream stream = nullptr;
    ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
    EXPECT_FALSE(DeviceGate::StreamIsCapturing(stream));
    EXPECT_FALSE(prepared.load()) << "the query waited for the set-up to let go of the lock";
    setup.join();
    EXPECT_EQ(DeviceGate::Status(), DeviceGateStatus::kWaitValue) << "the timer was calibrated";
    cuStreamDestroy(stream);
    EndChild();
  }
  RunChild("", "notimer");
}

// Stream waits (a GPU without the gate kernel), decided on the host at the call, released by
// the background thread (here the test's calls of ServiceWaits).
struct StreamWaits {
  int slot = -1;
  uint64_t owner = 0;
  CUstream stream = nullptr;
  GateMemory memory;
  // A wait until `in` from now: true when it is on the stream.
  bool WaitFor(int64_t in) {
    const int64_t now = RealtimeNs();
    const Timetable tt{1, now + in, 1'000'000'000, 0, 5'000'000, 0, 1'000'000'000};
    DeviceGate::HostDecision decided;
    memory = GateMemory{};
    const bool on =
        DeviceGate::Enqueue(slot, stream, tt, YieldRequest{}, 0, 1'000'000'000, memory, decided);
    return on && decided.decided && decided.decision.action == GateAction::kWaitUntil;
  }
  uint32_t Released() const { return Slots()[slot].release; }
};
StreamWaits WithStreamWaits() {
  setenv("METRONOME_FAKE_CUDA_SM", "70", 1);
  StreamWaits w;
  w.slot = DeviceGate::Prepare(nullptr, kCapNs, w.owner);
  EXPECT_GE(w.slot, 0);
  EXPECT_EQ(DeviceGate::Status(), DeviceGateStatus::kWaitValue);
  EXPECT_EQ(cuStreamCreate(&w.stream, 0), CUDA_SUCCESS);
  return w;
}

// A host ahead of its GPU enqueues the next wait before the last one is due: each is released
// at its own time, in order (they were released together, at the later one's).
TEST(StreamWaits, EachIsReleasedAtItsOwnTime) {
  if (InChild()) {
    StreamWaits w = WithStreamWaits();
    ASSERT_GE(w.slot, 0);
    DeviceGate::ServeWaits(true);
    const uint32_t before = w.Released();
    const int64_t start = MonotonicNs();
    ASSERT_TRUE(w.WaitFor(30 * kMs));
    ASSERT_TRUE(w.WaitFor(400 * kMs));
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    DeviceGate::ServiceWaits(RealtimeNs());
    EXPECT_EQ(w.Released(), before + 1) << "the first wait, due 30 ms after the call, after "
                                        << (MonotonicNs() - start) / kMs << " ms";
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    DeviceGate::ServiceWaits(RealtimeNs());
    EXPECT_EQ(w.Released(), before + 2);
    DeviceGate::ServeWaits(false);
    cuStreamDestroy(w.stream);
    EndChild();
  }
  RunChild("", nullptr);
}

// NTP steps the clock back by ten seconds while a stream waits for a window 30 ms away: the
// wait is released after its 30 ms, not ten seconds later.
TEST(StreamWaits, AStepOfTheWallClockDoesNotStretchOne) {
  if (InChild()) {
    StreamWaits w = WithStreamWaits();
    ASSERT_GE(w.slot, 0);
    DeviceGate::ServeWaits(true);
    const uint32_t before = w.Released();
    const int64_t start = MonotonicNs();
    ASSERT_TRUE(w.WaitFor(30 * kMs));
    realtime_shift_ns.store(-10'000'000'000);
    while (w.Released() == before && MonotonicNs() - start < 3'000 * kMs) {
      DeviceGate::ServiceWaits(RealtimeNs());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const int64_t held = MonotonicNs() - start;
    realtime_shift_ns.store(0);
    EXPECT_EQ(w.Released(), before + 1);
    EXPECT_LT(held, 2'000 * kMs) << "held for the step";
    DeviceGate::ServeWaits(false);
    cuStreamDestroy(w.stream);
    EndChild();
  }
  RunChild("", nullptr);
}

// Only the background thread releases stream waits: while it does not run (not yet, or no
// longer, as the process ends) none is enqueued (the host decides), and one enqueued as it
// stops is released.
TEST(StreamWaits, NoneWithoutTheBackgroundThread) {
  if (InChild()) {
    StreamWaits w = WithStreamWaits();
    ASSERT_GE(w.slot, 0);
    EXPECT_FALSE(w.WaitFor(30 * kMs)) << "a wait that nothing would release";
    DeviceGate::ServeWaits(true);
    ASSERT_TRUE(w.WaitFor(500 * kMs));
    const uint32_t issued = w.Released() + 1;
    DeviceGate::ServeWaits(false);
    EXPECT_EQ(w.Released(), issued) << "a pending wait outlived the background thread";
    EXPECT_FALSE(w.WaitFor(30 * kMs));
    cuStreamDestroy(w.stream);
    EndChild();
  }
  RunChild("", nullptr);
}

// A gate kernel whose GPU timer stands still holds its stream until the watchdog releases it;
// the watchdog looks only at slots in use, so a communicator's end lets its kernel go itself.
TEST(DeviceGateSlots, AKernelHeldOnAReleasedSlotIsLetGo) {
  if (InChild()) {
    uint64_t owner = 0;
    const int slot = DeviceGate::Prepare(nullptr, kCapNs, owner);
    ASSERT_GE(slot, 0);
    ASSERT_EQ(DeviceGate::Status(), DeviceGateStatus::kKernel);
    const int64_t now = RealtimeNs();
    const Timetable tt{1, now + 40 * kMs, 1'000'000'000, 0, 5'000'000, 0, 1'000'000'000};
    DeviceGate::Publish(slot, owner, &tt, YieldSet{}, kCapNs);
    CUstream stream = nullptr;
    ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
    GateMemory memory;
    DeviceGate::HostDecision decided;
    ASSERT_TRUE(DeviceGate::Enqueue(slot, stream, tt, YieldRequest{}, 0, kCapNs, memory, decided));
    EXPECT_FALSE(decided.decided) << "the kernel decides";
    std::atomic<int64_t> reached{0};
    ASSERT_EQ(cuLaunchHostFunc(stream, StampOnStream, &reached), CUDA_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(reached.load(), 0) << "the kernel did not hold (its timer should stand still)";
    DeviceGate::ReleaseSlot(slot);
    const int64_t start = MonotonicNs();
    while (reached.load() == 0 && MonotonicNs() - start < 2'000 * kMs) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_NE(reached.load(), 0) << "the stream is still held";
    EndChild();  // a stream thread still held would be ended with the child
  }
  RunChild("", "hang");
}

// A communicator used on two streams at once (FSDP gathers and reduces on two) has two gate
// kernels of its slot running together: the counts the watchdog compares (launched, finished)
// must not lose an increment, or it takes a kernel for stuck and steps the context down.
TEST(DeviceGateSlots, KernelsOfOneSlotOnTwoStreamsCountEveryLaunch) {
  if (InChild()) {
    uint64_t owner = 0;
    const int slot = DeviceGate::Prepare(nullptr, kCapNs, owner);
    ASSERT_GE(slot, 0);
    ASSERT_EQ(DeviceGate::Status(), DeviceGateStatus::kKernel);
    CUstream a = nullptr;
    CUstream b = nullptr;
    ASSERT_EQ(cuStreamCreate(&a, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&b, 0), CUDA_SUCCESS);
    const uint64_t before = Slots()[slot].launches;
    constexpr int kLaunches = 100'000;
    std::thread other([&] {
      for (int i = 0; i < kLaunches; ++i) DeviceGate::EnqueueTurns(slot, b);
    });
    for (int i = 0; i < kLaunches; ++i) DeviceGate::EnqueueTurns(slot, a);
    other.join();
    cuStreamSynchronize(a);
    cuStreamSynchronize(b);
    const DeviceGateSlot& g = Slots()[slot];
    EXPECT_EQ(g.launches - before, 2u * kLaunches) << "launches lost";
    EXPECT_EQ(g.finished, g.launches) << "the watchdog would see a kernel running for good";
    cuStreamDestroy(a);
    cuStreamDestroy(b);
    EndChild();
  }
  RunChild("", nullptr);
}

// After the context steps down from the kernels (here a launch fails), the slot's last stamps
// are no longer the stream's: no edges are reported from it.
TEST(DeviceGateSlots, NoEdgesOnceTheContextStepsDown) {
  if (InChild()) {
    uint64_t owner = 0;
    const int slot = DeviceGate::Prepare(nullptr, kCapNs, owner);  // launch 1: the timer
    ASSERT_GE(slot, 0);
    ASSERT_EQ(DeviceGate::Status(), DeviceGateStatus::kKernel);
    CUstream stream = nullptr;
    ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
    EXPECT_TRUE(DeviceGate::EnqueueTurns(slot, stream));    // launch 2: stamps the begin
    EXPECT_TRUE(DeviceGate::EnqueueEndEdge(slot, stream));  // launch 3: stamps the end
    cuStreamSynchronize(stream);
    int64_t begun = 0;
    int64_t ended = 0;
    EXPECT_TRUE(DeviceGate::Edges(slot, owner, begun, ended));
    EXPECT_NE(begun, 0);
    EXPECT_NE(ended, 0);
    EXPECT_FALSE(DeviceGate::EnqueueTurns(slot, stream));  // launch 4 fails: stream waits
    EXPECT_EQ(DeviceGate::Status(), DeviceGateStatus::kWaitValue);
    EXPECT_EQ(DeviceGate::Fallbacks(), 1u);
    EXPECT_FALSE(DeviceGate::Edges(slot, owner, begun, ended));
    EXPECT_EQ(begun, 0) << "a frozen stamp reported after the step down";
    EXPECT_EQ(ended, 0);
    cuStreamDestroy(stream);
    EndChild();
  }
  RunChild("cuLaunchKernel#4", nullptr);
}

// The end-edge kernel goes after the call that completes a phase's bytes only when NCCL
// enqueued that call: not after one that failed, nor after one NCCL answered ncclInProgress
// (a nonblocking communicator, whose collectives NCCL launches later from its own thread: the
// kernel would stamp before them), which from then on takes no turns on the stream. A group's
// phases end for every communicator in it, once the group is enqueued.
TEST(DeviceGateSlots, EndEdgesOnlyBehindEnqueuedCollectives) {
  if (InChild()) {
    Config c;
    c.max_wait_ns = kCapNs;
    c.gate = GateKind::kAuto;
    c.log_level = LogLevel::kWarn;
    static Runtime* kept = nullptr;  // leaked on purpose, like the real one
    kept = new Runtime(c);           // nothing registered: no background thread
    Runtime& rt = *kept;
    CUstream stream = nullptr;
    ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
    JobState& job = *new JobState();
    job.edges_asked.store(true);
    CommState* comms = new CommState[3];
    for (int i = 0; i < 2; ++i) {
      CommState& st = comms[i];
      st.job = &job;
      st.device_slot = DeviceGate::Prepare(nullptr, kCapNs, st.device_owner);
      ASSERT_GE(st.device_slot, 0);
      st.device_gate = true;
      st.phase_bytes.store(4096);
    }
    // The stamp of the phase's end the slot holds after one phase ended by a call that NCCL
    // answered `r`.
    const auto ended_after = [&](CommState& st, ncclResult_t r) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      st.edge_begun_ns.store(RealtimeNs());
      Runtime::CallToken tok;
      tok.st = &st;
      tok.bytes = 4096;
      tok.stream = stream;
      tok.start_ns = RealtimeNs();
      st.phase_issued = tok.bytes;
      rt.AfterCollective(tok, r);
      cuStreamSynchronize(stream);
      return Slots()[st.device_slot].edge_ended_gpu_ns;
    };
    CommState& a = comms[0];
    CommState& b = comms[1];
    const int64_t first = ended_after(a, ncclSuccess);
    EXPECT_NE(first, 0) << "an enqueued collective's end is stamped";
    EXPECT_EQ(ended_after(a, ncclUnhandledCudaError), first) << "stamped after a failed call";
    EXPECT_FALSE(a.nonblocking.load());

    // A group of both communicators: both ends are stamped once it is enqueued, none when NCCL
    // answers the group's end ncclInProgress.
    ThreadState& ts = Tls();
    const auto group = [&](ncclResult_t r) {
      ++ts.group_depth;
      const int64_t a0 = ended_after(a, ncclSuccess);
      const int64_t b0 = ended_after(b, ncclSuccess);
      EXPECT_EQ(Slots()[a.device_slot].edge_ended_gpu_ns, a0) << "stamped before the group ended";
      --ts.group_depth;
      Runtime::AfterGroup(ts, r);
      cuStreamSynchronize(stream);
      EXPECT_EQ(ts.n_end_edges, 0);
      return std::pair<bool, bool>{Slots()[a.device_slot].edge_ended_gpu_ns != a0,
                                   Slots()[b.device_slot].edge_ended_gpu_ns != b0};
    };
    EXPECT_EQ(group(ncclSuccess), (std::pair<bool, bool>{true, true}));
    EXPECT_EQ(group(ncclInProgress), (std::pair<bool, bool>{false, false}));
    EXPECT_TRUE(a.nonblocking.load());
    EXPECT_TRUE(b.nonblocking.load());

    // A nonblocking communicator's phase start launches no turn kernel.
    CommState& nb = comms[1];
    const uint64_t launches = Slots()[nb.device_slot].launches;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a gap: a phase start
    const Runtime::CallToken tok = rt.BeforeCollective(&nb, Op::kAllReduce, 4096, stream);
    rt.AfterCollective(tok, ncclInProgress);
    cuStreamSynchronize(stream);
    EXPECT_EQ(Slots()[nb.device_slot].launches, launches) << "a turn kernel ahead of NCCL's";
    // A blocking one's does (the same call on a fresh communicator).
    CommState& fresh = comms[2];
    fresh.job = &job;
    fresh.device_slot = DeviceGate::Prepare(nullptr, kCapNs, fresh.device_owner);
    ASSERT_GE(fresh.device_slot, 0);
    fresh.device_gate = true;
    const uint64_t fresh_launches = Slots()[fresh.device_slot].launches;
    rt.AfterCollective(rt.BeforeCollective(&fresh, Op::kAllReduce, 4096, stream), ncclSuccess);
    cuStreamSynchronize(stream);
    EXPECT_EQ(Slots()[fresh.device_slot].launches, fresh_launches + 1);
    EXPECT_FALSE(fresh.nonblocking.load());
    cuStreamDestroy(stream);
    EndChild();
  }
  RunChild("", nullptr);
}

// The GPU timer drifts from the host clock (here it gains 20 ms a second, 10 ms over the test):
// the background thread calibrates it again once a period, and moves the slots' offsets with
// it; an edge already seen keeps the local time it was given. (Each calibration on the stand-in
// may be off by up to 2 ms on a loaded machine: 5 ms bounds.)
TEST(DeviceGateSlots, TheTimerIsCalibratedAgainAsItDrifts) {
  if (InChild()) {
    constexpr int64_t kGain = 20'000'000;  // ns a second
    setenv("METRONOME_FAKE_CUDA_GAIN", std::to_string(kGain).c_str(), 1);
    uint64_t owner = 0;
    const int slot = DeviceGate::Prepare(nullptr, kCapNs, owner);
    ASSERT_GE(slot, 0);
    ASSERT_EQ(DeviceGate::Status(), DeviceGateStatus::kKernel);
    const int64_t calibrated = RealtimeNs();
    const int64_t before = DeviceGate::HostMinusGpuNs();
    CUstream stream = nullptr;
    ASSERT_EQ(cuStreamCreate(&stream, 0), CUDA_SUCCESS);
    // The stamp of a kernel run now, on the local clock as the gate reports it.
    const auto stamp = [&] {
      EXPECT_TRUE(DeviceGate::EnqueueTurns(slot, stream));
      cuStreamSynchronize(stream);
      int64_t begun = 0;
      int64_t ended = 0;
      EXPECT_TRUE(DeviceGate::Edges(slot, owner, begun, ended));
      return begun;
    };
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const int64_t seen = stamp();
    DeviceGate::Recalibrate(RealtimeNs());
    EXPECT_EQ(DeviceGate::HostMinusGpuNs(), before) << "calibrated again before its period";
    const int64_t now = RealtimeNs();
    DeviceGate::Recalibrate(now + DeviceGate::kRecalibrateNs);
    const int64_t after = DeviceGate::HostMinusGpuNs();
    const int64_t drift = (now - calibrated) / 1000 * kGain / 1'000'000;
    std::printf("host - gpu %lld ns, %lld ns later (drift %lld ns)\n",
                static_cast<long long>(before), static_cast<long long>(after - before),
                static_cast<long long>(drift));
    EXPECT_NEAR(static_cast<double>(after - before), static_cast<double>(-drift), 5e6);
    EXPECT_EQ(Slots()[slot].server_minus_gpu_ns, after) << "the slot's offset";
    int64_t begun = 0;
    int64_t ended = 0;
    EXPECT_TRUE(DeviceGate::Edges(slot, owner, begun, ended));
    EXPECT_EQ(begun, seen) << "an edge already seen moved";
    const int64_t called = RealtimeNs();
    const int64_t fresh = stamp();
    EXPECT_GE(fresh, called - 5'000'000);
    EXPECT_LE(fresh, RealtimeNs() + 5'000'000) << "a new stamp on the old calibration";
    cuStreamDestroy(stream);
    EndChild();
  }
  RunChild("", nullptr);
}
// An application that captures a CUDA graph in the global mode (PyTorch's default) makes every
// potentially unsafe call of another thread in that mode fail, and loses its capture with it.
// The background thread's calibration runs in the relaxed mode: the capture survives, and the
// timer is calibrated again all the same.
TEST(DeviceGateSlots, CalibratingAgainLeavesAnApplicationsGraphCaptureIntact) {
  if (InChild()) {
    setenv("METRONOME_FAKE_CUDA_GAIN", "20000000", 1);  // 20 ms a second: the offset moves
    uint64_t owner = 0;
    ASSERT_GE(DeviceGate::Prepare(nullptr, kCapNs, owner), 0);
    const int64_t before = DeviceGate::HostMinusGpuNs();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CUstream app = nullptr;
    ASSERT_EQ(cuStreamCreate(&app, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamBeginCapture(app, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    std::thread background(
        [] { DeviceGate::Recalibrate(RealtimeNs() + DeviceGate::kRecalibrateNs); });
    background.join();
    CUgraph graph = nullptr;
    EXPECT_EQ(cuStreamEndCapture(app, &graph), CUDA_SUCCESS) << "the capture was invalidated";
    EXPECT_LT(DeviceGate::HostMinusGpuNs(), before - 3'000'000) << "not calibrated again";
    cuStreamDestroy(app);
    EndChild();
  }
  RunChild("", nullptr);
}

}  // namespace
}  // namespace metronome::shim
