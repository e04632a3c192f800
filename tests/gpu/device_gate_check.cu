// GPU check of the device gate (run by run_gpu_checks.sh under LD_PRELOAD=libmetronome.so with
// METRONOME_SCHEDULER pointing at the ROUTER this program serves itself).
//
// It plays the scheduler (hello -> welcome, ping -> pong, a timetable: 1 ms windows every 20 ms),
// creates a world-size-1 NCCL communicator, and issues phases of collectives separated by idle
// gaps. Right after each phase's first ncclAllReduce(count 0) it enqueues a kernel that stamps
// %globaltimer into mapped memory: that stamp is when the stream passed the gate. The GPU timer
// is calibrated against CLOCK_REALTIME here as in the shim. Printed: how far each release is from
// the window it was aimed at (p50/p99/max µs), and how long the host was held (should be ~0:
// the device gate holds the stream, not the thread).
//
// With a third argument, max_wait in ms below the period, it checks the gate memory instead: a
// late phase (its next window further than max_wait) realigns (waits for that window) at most
// once in 4 phases and fails open (goes at once) otherwise.
#include <cuda_runtime.h>
#include <nccl.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "metronome/common/clock.hpp"
#include "metronome/common/protocol.hpp"

namespace proto = metronome::proto;
using metronome::RealtimeNs;

#define CHECK_CUDA(x)                                               \
  do {                                                              \
    cudaError_t e_ = (x);                                           \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                 \
    }                                                               \
  } while (0)
#define CHECK_NCCL(x)                                               \
  do {                                                              \
    ncclResult_t r_ = (x);                                          \
    if (r_ != ncclSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(r_)); \
      std::exit(3);                                                 \
    }                                                               \
  } while (0)

__device__ __forceinline__ int64_t GlobalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return static_cast<int64_t>(t);
}

__global__ void Stamp(volatile int64_t* out) {
  *out = GlobalTimer();
}

__global__ void Ticker(volatile int64_t* out, volatile int* stop) {
  const int64_t start = GlobalTimer();
  while (*stop == 0 && GlobalTimer() - start < 5'000'000) *out = GlobalTimer();
}

constexpr int64_t kPeriod = 20'000'000;
constexpr int64_t kWindow = 1'000'000;
constexpr int kRealignSpacing = 4;  // common's kRealignSpacing
int64_t g_max_wait = kPeriod;

std::atomic<bool> g_stop{false};
std::atomic<int> g_hellos{0};
int64_t g_epoch = 0;

void Scheduler(const char* endpoint) {
  void* ctx = zmq_ctx_new();
  void* sock = zmq_socket(ctx, ZMQ_ROUTER);
  int zero = 0;
  zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
  if (zmq_bind(sock, endpoint) != 0) {
    std::fprintf(stderr, "bind %s failed\n", endpoint);
    std::exit(4);
  }
  char id[256];
  char buf[65536];
  int64_t last_push = 0;
  std::string job;
  size_t id_len = 0;
  while (!g_stop.load()) {
    zmq_pollitem_t item{sock, 0, ZMQ_POLLIN, 0};
    zmq_poll(&item, 1, 5);
    while (true) {
      int n = zmq_recv(sock, id, sizeof(id), ZMQ_DONTWAIT);
      if (n < 0) break;
      id_len = static_cast<size_t>(n);
      int m = zmq_recv(sock, buf, sizeof(buf), ZMQ_DONTWAIT);
      if (m < 0) break;
      proto::Decoded d = proto::Decode(buf, static_cast<size_t>(m));
      if (!d.ok()) continue;
      std::string reply;
      if (auto* h = std::get_if<proto::Hello>(&d.message)) {
        job = h->job_id;
        g_hellos.fetch_add(1);
        reply = proto::Encode(proto::Welcome{1, 1000, RealtimeNs()});
      } else if (auto* p = std::get_if<proto::ClockPing>(&d.message)) {
        const int64_t t = RealtimeNs();
        reply = proto::Encode(proto::ClockPong{p->seq, p->t1_ns, t, t});
      }
      if (!reply.empty()) {
        zmq_send(sock, id, id_len, ZMQ_SNDMORE);
        zmq_send(sock, reply.data(), reply.size(), 0);
      }
    }
    const int64_t now = RealtimeNs();
    if (!job.empty() && now - last_push > 500'000'000) {
      last_push = now;
      proto::TimetablePush push;
      push.job_id = job;
      push.timetable = metronome::Timetable{1, g_epoch, kPeriod, 0, kWindow, 0, g_max_wait};
      const std::string bytes = proto::Encode(push);
      zmq_send(sock, id, id_len, ZMQ_SNDMORE);
      zmq_send(sock, bytes.data(), bytes.size(), 0);
    }
  }
  zmq_close(sock);
  zmq_ctx_term(ctx);
}

int main(int argc, char** argv) {
  const char* endpoint = argc > 1 ? argv[1] : "tcp://127.0.0.1:7411";
  const int phases = argc > 2 ? std::atoi(argv[2]) : 60;
  if (argc > 3) g_max_wait = std::clamp<int64_t>(std::atoll(argv[3]) * 1'000'000, 0, kPeriod);
  const bool realign_check = g_max_wait < kPeriod;
  g_epoch = RealtimeNs();
  std::thread sched(Scheduler, endpoint);

  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));
  int64_t* host = nullptr;
  CHECK_CUDA(cudaHostAlloc(&host, 64, cudaHostAllocMapped));
  int64_t* dev = nullptr;
  CHECK_CUDA(cudaHostGetDevicePointer(&dev, host, 0));
  volatile int64_t* stamp = host;
  volatile int* stop = reinterpret_cast<volatile int*>(host + 4);

  // Calibration (host - gpu), as in the shim: the freshest read bounds it from above.
  cudaStream_t cal;
  CHECK_CUDA(cudaStreamCreateWithFlags(&cal, cudaStreamNonBlocking));
  *stamp = 0;
  *stop = 0;
  Ticker<<<1, 1, 0, cal>>>(dev, reinterpret_cast<int*>(dev + 4));
  int64_t host_minus_gpu = INT64_MAX;
  const int64_t until = RealtimeNs() + 3'000'000;
  while (RealtimeNs() < until) {
    const int64_t g = *stamp;
    const int64_t h = RealtimeNs();
    if (g != 0) host_minus_gpu = std::min(host_minus_gpu, h - g);
  }
  *stop = 1;
  CHECK_CUDA(cudaStreamSynchronize(cal));

  ncclUniqueId uid;
  CHECK_NCCL(ncclGetUniqueId(&uid));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, 1, uid, 0));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* buf = nullptr;
  CHECK_CUDA(cudaMalloc(&buf, 1 << 20));

  // Wait until the shim registered and holds the timetable (it logs it).
  for (int i = 0; i < 300 && g_hellos.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));

  std::vector<double> err_us;
  std::vector<double> host_us;
  std::vector<int> late_index;    // phases whose next window was further than max_wait
  std::vector<bool> late_waited;  // ... and whether the gate held them to it
  for (int i = 0; i < phases; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(7 + i % 5));  // idle: a new phase
    *stamp = 0;
    const int64_t h0 = RealtimeNs();
    CHECK_NCCL(ncclAllReduce(buf, buf, 0, ncclFloat, ncclSum, comm, s));  // gated (phase start)
    const int64_t h1 = RealtimeNs();
    Stamp<<<1, 1, 0, s>>>(dev);
    CHECK_NCCL(ncclAllReduce(buf, buf, 1 << 18, ncclFloat, ncclSum, comm, s));  // the burst
    CHECK_CUDA(cudaStreamSynchronize(s));
    const int64_t release = *stamp + host_minus_gpu;  // host clock
    // The window the gate aimed at: the latest opening at or before the release.
    const int64_t k = (release - g_epoch) / kPeriod;
    const int64_t open = g_epoch + k * kPeriod;
    host_us.push_back(static_cast<double>(h1 - h0) / 1e3);
    const int64_t arrival_phase = (h0 - g_epoch) % kPeriod;
    const bool waited = release - h0 > 500'000;
    if (realign_check && arrival_phase > 0 && kPeriod - arrival_phase > g_max_wait + 500'000) {
      late_index.push_back(i);
      late_waited.push_back(waited);
    }
    if (!realign_check || waited) err_us.push_back(static_cast<double>(release - open) / 1e3);
  }
  g_stop.store(true);
  sched.join();
  CHECK_NCCL(ncclCommDestroy(comm));

  auto pct = [](std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  std::printf(
      "device_gate phases=%d release_after_window_open_us p50=%.1f p99=%.1f max=%.1f "
      "host_held_us p50=%.1f max=%.1f\n",
      phases, pct(err_us, 0.5), pct(err_us, 0.99), pct(err_us, 1.0), pct(host_us, 0.5),
      pct(host_us, 1.0));
  // Pass: the stream is released inside the 1 ms window, a few µs after it opens (launch of the
  // stamp kernel included), and the host is never held by the gate.
  const bool ok = pct(err_us, 0.5) >= 0 && pct(err_us, 0.5) < 20 && pct(err_us, 0.99) < 1000 &&
                  pct(host_us, 0.5) < 1000;
  if (!realign_check) {
    std::printf("device_gate %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  }
  // The gate memory: late phases realign (wait) at most once in kRealignSpacing phases.
  int realigned = 0;
  int failed_open = 0;
  int min_gap = phases;
  int last = -phases;
  for (size_t j = 0; j < late_index.size(); ++j) {
    if (!late_waited[j]) {
      ++failed_open;
      continue;
    }
    ++realigned;
    min_gap = std::min(min_gap, late_index[j] - last);
    last = late_index[j];
  }
  const bool memory_ok =
      realigned >= 1 && failed_open >= 1 && min_gap >= kRealignSpacing && pct(err_us, 0.5) < 20;
  std::printf(
      "device_gate_realign max_wait_ms=%lld late=%zu realigned=%d failed_open=%d "
      "min_gap_phases=%d\n",
      static_cast<long long>(g_max_wait / 1'000'000), late_index.size(), realigned, failed_open,
      min_gap);
  std::printf("device_gate_realign %s\n", memory_ok ? "PASS" : "FAIL");
  return memory_ok ? 0 : 1;
}
