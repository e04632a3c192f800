// What the shim costs per collective on a GPU. run.sh runs it four times: without the shim, and
// under LD_PRELOAD=libmetronome.so with METRONOME_MODE=off, observe, and enforce with a timetable
// under which every phase start goes at once (common's DecideGate: an arrival within the late
// slack after a window opened goes; window 1 µs, slack the rest of the 10 ms period), but is
// still gated: the device gate kernel is enqueued and decides on the GPU.
//
//   collective_cost LABEL [ENDPOINT]     (ENDPOINT: serve that timetable there)
//
// World-size-1 communicator, out-of-place sum all-reduce (in place, one rank, NCCL does nothing),
// 1 KiB and 64 MiB. Two regimes, both timed with CUDA events on the collective's stream:
//   burst   collectives back to back inside a phase: GPU µs per collective, host ns per call;
//   phase   one collective after 3 ms idle, so that each one starts a phase (in enforce, the gate
//           kernel runs before it): GPU µs from an event before the call to one after it, host
//           µs in the call.
// Printed, one line per size: cost label=... bytes=... burst_gpu_us=... (medians).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gpu_util.cuh"
#include "mini_scheduler.hpp"

using metronome::RealtimeNs;
using metronome::gpucheck::Percentile;

namespace {

void Idle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
}

struct Figures {
  double burst_gpu_us, burst_host_ns, phase_gpu_us, phase_gpu_p90_us, phase_host_us;
};

Figures Measure(ncclComm_t comm, cudaStream_t s, const float* send, float* recv, size_t count,
                int burst) {
  cudaEvent_t a;
  cudaEvent_t b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  auto allreduce = [&] {
    CHECK_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s));
  };
  // Warm-up, in the same shape (phases of 8): NCCL's first calls, and the shim's phase tracker
  // sees gaps of µs inside a phase and of ms between.
  for (int p = 0; p < 10; ++p) {
    Idle();
    for (int i = 0; i < 8; ++i) allreduce();
    CHECK_CUDA(cudaStreamSynchronize(s));
  }
  std::vector<double> burst_gpu, burst_host;
  for (int rep = 0; rep < 7; ++rep) {
    Idle();
    const int64_t h0 = RealtimeNs();
    CHECK_CUDA(cudaEventRecord(a, s));
    for (int i = 0; i < burst; ++i) allreduce();
    CHECK_CUDA(cudaEventRecord(b, s));
    const int64_t h1 = RealtimeNs();
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    burst_gpu.push_back(ms * 1e3 / burst);
    burst_host.push_back(static_cast<double>(h1 - h0) / burst);
  }
  std::vector<double> phase_gpu, phase_host;
  for (int p = 0; p < 60; ++p) {
    Idle();
    CHECK_CUDA(cudaEventRecord(a, s));
    const int64_t h0 = RealtimeNs();
    allreduce();
    const int64_t h1 = RealtimeNs();
    CHECK_CUDA(cudaEventRecord(b, s));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    phase_gpu.push_back(ms * 1e3);
    phase_host.push_back(static_cast<double>(h1 - h0) / 1e3);
  }
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  return {Percentile(burst_gpu, 0.5), Percentile(burst_host, 0.5), Percentile(phase_gpu, 0.5),
          Percentile(phase_gpu, 0.9), Percentile(phase_host, 0.5)};
}

}  // namespace

int main(int argc, char** argv) {
  const char* label = argc > 1 ? argv[1] : "none";
  const char* endpoint = argc > 2 ? argv[2] : nullptr;
  constexpr int64_t kPeriod = 10'000'000;
  constexpr int64_t kWindow = 1'000;
  std::unique_ptr<metronome::gpucheck::MiniScheduler> sched;
  if (endpoint != nullptr) {
    sched = std::make_unique<metronome::gpucheck::MiniScheduler>(
        endpoint,
        metronome::Timetable{1, RealtimeNs(), kPeriod, 0, kWindow, kPeriod - kWindow, kPeriod});
    if (!sched->Start()) return 4;
  }
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));
  ncclUniqueId uid;
  CHECK_NCCL(ncclGetUniqueId(&uid));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, 1, uid, 0));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  constexpr size_t kMaxBytes = size_t{64} << 20;
  float* send = nullptr;
  float* recv = nullptr;
  CHECK_CUDA(cudaMalloc(&send, kMaxBytes));
  CHECK_CUDA(cudaMalloc(&recv, kMaxBytes));
  CHECK_CUDA(cudaMemset(send, 0, kMaxBytes));
  if (sched) {
    // The shim registers, syncs its clock and takes the timetable (as device_gate_check waits).
    for (int i = 0; i < 300 && sched->Hellos() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  }
  const struct {
    size_t bytes;
    int burst;
  } sizes[] = {{1024, 256}, {kMaxBytes, 32}};
  for (const auto& z : sizes) {
    const Figures f = Measure(comm, s, send, recv, z.bytes / sizeof(float), z.burst);
    std::printf(
        "cost label=%s bytes=%zu burst_gpu_us=%.3f burst_host_ns=%.0f phase_gpu_us=%.2f "
        "phase_gpu_p90_us=%.2f phase_host_us=%.2f\n",
        label, z.bytes, f.burst_gpu_us, f.burst_host_ns, f.phase_gpu_us, f.phase_gpu_p90_us,
        f.phase_host_us);
    std::fflush(stdout);
  }
  CHECK_NCCL(ncclCommDestroy(comm));  // the shim logs its counters (and says bye)
  if (sched) sched->Stop();
  return 0;
}
