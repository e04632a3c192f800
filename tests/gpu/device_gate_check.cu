// GPU check of the device gate (run by run.sh under LD_PRELOAD=libmetronome.so with
// METRONOME_SCHEDULER pointing at the ROUTER this program serves itself).
//
//   device_gate_check ENDPOINT [PHASES [MAX_WAIT_MS]]
//
// It plays the scheduler (mini_scheduler.hpp: a timetable of 1 ms windows every 20 ms), creates a
// world-size-1 NCCL communicator, and issues phases of collectives separated by idle gaps. Right
// after each phase's first ncclAllReduce(count 0) it enqueues a kernel that stamps %globaltimer
// into mapped memory: that stamp is when the stream passed the gate. The GPU timer is related to
// CLOCK_REALTIME by a two-sided bracket (gpu_util.cuh), measured right after the communicator is
// created (when the shim calibrated) and again at the end: the shim's own offset, in its log, is
// judged against it by run.sh. Printed: how far each release is from the window it was aimed at
// (release_us_*: µs after the window opened), and how long the host was held (should be ~0: the
// device gate holds the stream, not the thread).
//
// With MAX_WAIT_MS below the period it checks the gate memory instead: a late phase (its next
// window further than max_wait) realigns (waits for that window) at most once in 4 phases and
// fails open (goes at once) otherwise.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gpu_util.cuh"
#include "mini_scheduler.hpp"

using metronome::RealtimeNs;
using metronome::gpucheck::Percentile;

__global__ void Stamp(volatile int64_t* out) {
  *out = metronome::gpucheck::GlobalTimer();
}

constexpr int64_t kPeriod = 20'000'000;
constexpr int64_t kWindow = 1'000'000;
constexpr int kRealignSpacing = 4;  // common's kRealignSpacing

int main(int argc, char** argv) {
  const char* endpoint = argc > 1 ? argv[1] : "tcp://127.0.0.1:7411";
  const int phases = argc > 2 ? std::atoi(argv[2]) : 60;
  int64_t max_wait = kPeriod;
  if (argc > 3) max_wait = std::clamp<int64_t>(std::atoll(argv[3]) * 1'000'000, 0, kPeriod);
  const bool realign_check = max_wait < kPeriod;
  const int64_t epoch = RealtimeNs();
  metronome::gpucheck::MiniScheduler sched(
      endpoint, metronome::Timetable{1, epoch, kPeriod, 0, kWindow, 0, max_wait});
  if (!sched.Start()) return 4;

  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));
  int64_t* host = nullptr;
  CHECK_CUDA(cudaHostAlloc(&host, 64, cudaHostAllocMapped));
  int64_t* dev = nullptr;
  CHECK_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), host, 0));
  volatile int64_t* stamp = host;

  ncclUniqueId uid;
  CHECK_NCCL(ncclGetUniqueId(&uid));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, 1, uid, 0));  // the shim loads its kernel and calibrates
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* buf = nullptr;
  CHECK_CUDA(cudaMalloc(&buf, 1 << 20));

  metronome::gpucheck::Prober prober;
  const int64_t tick = prober.Tick();
  const int64_t t_start = RealtimeNs();
  const metronome::gpucheck::Bracket at_start = prober.Measure();
  if (at_start.samples == 0) {
    std::fprintf(stderr, "calibration: the GPU never saw the host clock (mapped memory?)\n");
    return 5;
  }
  const int64_t host_minus_gpu = at_start.mid();

  // Wait until the shim registered and holds the timetable (it logs it).
  for (int i = 0; i < 300 && sched.Hellos() == 0; ++i)
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
    // The window the gate aimed at: the opening nearest the release (a release a little before
    // it means the bracket, or the shim's calibration, is off by that much).
    const int64_t k = (release - epoch + kPeriod / 2) / kPeriod;
    const int64_t open = epoch + k * kPeriod;
    host_us.push_back(static_cast<double>(h1 - h0) / 1e3);
    const int64_t arrival_phase = (h0 - epoch) % kPeriod;
    const bool waited = release - h0 > 500'000;
    if (realign_check && arrival_phase > 0 && kPeriod - arrival_phase > max_wait + 500'000) {
      late_index.push_back(i);
      late_waited.push_back(waited);
    }
    if (!realign_check || waited) err_us.push_back(static_cast<double>(release - open) / 1e3);
  }
  const metronome::gpucheck::Bracket at_end = prober.Measure();
  const int64_t t_end = RealtimeNs();
  CHECK_NCCL(ncclCommDestroy(comm));  // the shim logs its counters, the kernel's included
  sched.Stop();

  // run.sh compares the shim's logged offset with the bracket at the start; the drift is how far
  // the two clocks moved apart over the run (the shim calibrates once per context).
  std::printf(
      "calibration tick_ns=%lld start_lo_ns=%lld start_hi_ns=%lld start_samples=%d end_lo_ns=%lld "
      "end_hi_ns=%lld end_samples=%d drift_ns=%lld over_s=%.1f\n",
      static_cast<long long>(tick), static_cast<long long>(at_start.lo),
      static_cast<long long>(at_start.hi), at_start.samples, static_cast<long long>(at_end.lo),
      static_cast<long long>(at_end.hi), at_end.samples,
      static_cast<long long>(at_end.samples > 0 ? at_end.mid() - at_start.mid() : 0),
      static_cast<double>(t_end - t_start) / 1e9);
  std::printf(
      "device_gate phases=%d measured=%zu release_us_min=%.1f release_us_p50=%.1f "
      "release_us_p99=%.1f release_us_max=%.1f host_held_us_p50=%.1f host_held_us_max=%.1f\n",
      phases, err_us.size(), Percentile(err_us, 0.0), Percentile(err_us, 0.5),
      Percentile(err_us, 0.99), Percentile(err_us, 1.0), Percentile(host_us, 0.5),
      Percentile(host_us, 1.0));
  // Pass: the stream is released inside the 1 ms window, a few µs after it opens (launch of the
  // stamp kernel included), and the host is never held by the gate.
  const bool ok = !err_us.empty() && Percentile(err_us, 0.5) >= -5 &&
                  Percentile(err_us, 0.5) < 20 && Percentile(err_us, 0.99) < 1000 &&
                  Percentile(err_us, 0.01) > -1000 && Percentile(host_us, 0.5) < 1000;
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
  const bool memory_ok = realigned >= 1 && failed_open >= 1 && min_gap >= kRealignSpacing &&
                         Percentile(err_us, 0.5) < 20;
  std::printf(
      "device_gate_realign max_wait_ms=%lld late=%zu realigned=%d failed_open=%d "
      "min_gap_phases=%d\n",
      static_cast<long long>(max_wait / 1'000'000), late_index.size(), realigned, failed_open,
      min_gap);
  std::printf("device_gate_realign %s\n", memory_ok ? "PASS" : "FAIL");
  return memory_ok ? 0 : 1;
}
