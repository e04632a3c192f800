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
#include <string>
#include <thread>

#include "device_gate.hpp"
#include "metronome/common/clock.hpp"
#include "metronome/common/protocol.hpp"
#include "raw_peer.hpp"
#include "runtime.hpp"

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
  DeviceGateStatus status;  // the device gate at the end
  bool caller_held;         // the host gate held some collectives
  bool stream_held;         // the device gate held some on their stream
  int fallback_lines;
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
    Config c;
    c.scheduler = peer.Endpoint();
    c.max_wait_ns = kCapNs;
    c.gate = GateKind::kAuto;
    c.log_level = LogLevel::kInfo;
    c.node = "test-node";
    c.node_share = false;       // this rank talks to the test's scheduler itself
    auto* rt = new Runtime(c);  // leaked on purpose, like the real one
    Runtime::InstallForTesting(rt);
    auto* comm = reinterpret_cast<ncclComm_t>(0x7000);
    ncclUniqueId id{};
    id.internal[0] = 7;
    CommOrigin origin;
    origin.how = "test";
    origin.id = &id;
    origin.nranks = 2;
    origin.rank = 0;
    EXPECT_NE(rt->OnCommCreated(comm, origin), nullptr);
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
      rt->AfterCollective(tok);
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

// Runs one fault in a child process, bounded to 30 s, and checks what it saw. The child is this
// test program again, exec'd on the one test (a fork alone would inherit the shim's after-fork
// state, in which the device gate is off).
void ExpectFallback(const char* faults, const char* kernel, const Expected& want) {
  if (std::getenv("METRONOME_DRIVER_FAULTS_CHILD") != nullptr) {
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
    if (want.status == DeviceGateStatus::kKernel) {
      // The fake's "GPU timer" runs an hour behind the host clock, so a calibration that is
      // wrong is off by about an hour. Its samples come from a host thread: on a loaded 2-core
      // machine they lag by up to 2 ms (seen under ctest -j3); a GPU's are measured by
      // tests/gpu.
      EXPECT_LT(std::abs(o.calibration_error_ns), 10'000'000) << "timer calibration";
    }
    std::fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter =
      std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  std::fflush(nullptr);
  char log_path[] = "/tmp/metronome-driver-faults-XXXXXX";
  const int log_fd = mkstemp(log_path);
  ASSERT_GE(log_fd, 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
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
  while ((done = waitpid(child, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (done == 0) {
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
  ASSERT_NE(done, 0) << "the child hung\n" << log;
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status) << "\n" << log;
  EXPECT_EQ(WEXITSTATUS(status), 0) << log;
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
  ExpectFallback("cuLaunchKernel", nullptr, {DeviceGateStatus::kWaitValue, true, true, 1});
}

TEST(DriverFaults, KernelAndStreamWaitsFailHostGate) {
  ExpectFallback("cuLaunchKernel,cuStreamWaitValue32", nullptr,
                 {DeviceGateStatus::kUnavailable, true, false, 2});
}

TEST(DriverFaults, CaptureQueryFailsObserves) {
  // Stream waits (no kernel) ask whether the stream is captured; when the driver cannot say,
  // neither the stream nor the caller is held.
  ExpectFallback("cuModuleLoadData,cuStreamIsCapturing", nullptr,
                 {DeviceGateStatus::kWaitValue, false, false, 2});
}

TEST(DriverFaults, AKernelThatNeverReturnsIsReleasedAndStreamWaitsTakeOver) {
  ExpectFallback("", "hang", {DeviceGateStatus::kWaitValue, false, true, 1});
}

}  // namespace
}  // namespace metronome::shim
