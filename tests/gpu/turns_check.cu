// GPU check of taking turns on the stream (run by run.sh under LD_PRELOAD=libmetronome.so with
// METRONOME_SCHEDULER pointing at the ROUTER this program serves itself).
//
//   turns_check ENDPOINT [PHASES]
//
// It plays the scheduler (mini_scheduler.hpp) of a job with no gate of its own (an always-open
// timetable) that takes turns with one equal partner, job 7 (6 ms on the wire, 100 ms compute),
// and sends its own phase edges. It issues phases of an ncclAllReduce(count 0) and a 1 MiB burst
// on a world-size-1 communicator, with a kernel that stamps %globaltimer into mapped memory after
// each: when the stream passed the gate, and when the burst was done. The phases are issued
// every 20 ms on the clock (not after a sleep): the shim holds a communicator only while its
// computes (a phase's end to the next one's call) agree within 10 % (rhythm.hpp), and a held
// phase's stream synchronization must not lengthen the next compute. Every other phase has the
// partner in its phase: the partner's begin is relayed 3 ms before the phase is issued, its end
// 3 ms after, both scheduled ahead (the host does nothing else between phases). Printed and
// judged:
//   - held phases: how long after the partner's end went out the stream went on (the relay on
//     loopback, the shim's poll and the kernel's next read of mapped memory);
//   - free phases: how soon the stream went on (no hold); the host is never held;
//   - the edges the shim sent: its begin against the release stamp, its end against the burst's.
#include <algorithm>
#include <chrono>
#include <cmath>
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

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kPeriod = 50 * kMs;  // the job's own natural period: the longest a turn holds
constexpr uint64_t kPartner = 7;

int main(int argc, char** argv) {
  const char* endpoint = argc > 1 ? argv[1] : "tcp://127.0.0.1:7412";
  const int phases = argc > 2 ? std::atoi(argv[2]) : 40;
  const int64_t epoch = RealtimeNs();
  metronome::gpucheck::MiniScheduler sched(
      endpoint, metronome::Timetable{1, epoch, kPeriod, 0, kPeriod, 0, kPeriod});
  metronome::TurnSet set{5 * kMs, kPeriod, 1, {}};
  set.partners[0] = {kPartner, false, 6 * kMs, 100 * kMs, 0, 0};
  sched.EnableTurns(set);
  if (!sched.Start()) return 4;

  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaFree(nullptr));
  int64_t* host = nullptr;
  CHECK_CUDA(cudaHostAlloc(&host, 128, cudaHostAllocMapped));
  int64_t* dev = nullptr;
  CHECK_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), host, 0));
  volatile int64_t* released = host;
  volatile int64_t* done = host + 8;

  ncclUniqueId uid;
  CHECK_NCCL(ncclGetUniqueId(&uid));
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, 1, uid, 0));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float* buf = nullptr;
  CHECK_CUDA(cudaMalloc(&buf, 1 << 20));

  metronome::gpucheck::Prober prober;
  const metronome::gpucheck::Bracket bracket = prober.Measure();
  if (bracket.samples == 0) {
    std::fprintf(stderr, "calibration: the GPU never saw the host clock (mapped memory?)\n");
    return 5;
  }
  const int64_t host_minus_gpu = bracket.mid();

  struct Phase {
    bool partner_in_phase = false;
    int64_t called = 0;
    int64_t host_held = 0;
    int64_t release = 0;  // host clock
    int64_t done = 0;
    int64_t end_at = 0;  // the partner's end (its stamp; sent at that time)
  };
  const auto issue = [&](Phase& p) {
    *released = 0;
    *done = 0;
    p.called = RealtimeNs();
    CHECK_NCCL(ncclAllReduce(buf, buf, 0, ncclFloat, ncclSum, comm, s));  // the phase's start
    p.host_held = RealtimeNs() - p.called;
    Stamp<<<1, 1, 0, s>>>(dev);
    CHECK_NCCL(ncclAllReduce(buf, buf, 1 << 18, ncclFloat, ncclSum, comm, s));  // the burst
    Stamp<<<1, 1, 0, s>>>(dev + 8);
    CHECK_CUDA(cudaStreamSynchronize(s));
    p.release = *released + host_minus_gpu;
    p.done = *done + host_minus_gpu;
  };

  for (int i = 0; i < 300 && sched.Hellos() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Phase k is issued at t0 + k * kCadence: 3 s of phases for registration, the turn set and the
  // rhythm (the shim ends a phase by its bytes, once known), then the measured ones, on one
  // cadence throughout. A phase whose stream is held longer than that (it never should be: the
  // partner's end comes 3 ms after the call) makes the next one go at once.
  constexpr int64_t kCadence = 20 * kMs;
  constexpr int kWarm = 150;
  const int64_t t0 = RealtimeNs() + 10 * kMs;
  const auto tick = [&](int k) { return t0 + static_cast<int64_t>(k) * kCadence; };
  const auto sleep_until = [](int64_t t_ns) {
    const int64_t d = t_ns - RealtimeNs();
    if (d > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(d));
  };
  std::vector<Phase> all(static_cast<size_t>(phases));
  for (int i = 0; i < phases; ++i) {
    Phase& p = all[static_cast<size_t>(i)];
    p.partner_in_phase = i % 2 == 1;
    if (p.partner_in_phase) {
      const int64_t at = tick(kWarm + i);
      sched.ScheduleEdge(kPartner, true, at - 3 * kMs);
      p.end_at = at + 3 * kMs;
      sched.ScheduleEdge(kPartner, false, p.end_at);
    }
  }
  for (int k = 0; k < kWarm; ++k) {
    sleep_until(tick(k));
    Phase warm;
    issue(warm);
  }
  for (int i = 0; i < phases; ++i) {
    sleep_until(tick(kWarm + i));
    issue(all[static_cast<size_t>(i)]);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the last edges
  CHECK_NCCL(ncclCommDestroy(comm));  // the shim logs its counters, the kernel's included
  const auto sent = sched.SentEdges();
  const auto edges = sched.Edges();
  sched.Stop();

  std::vector<double> after_end_us, free_us, host_us, begin_err_us, end_err_us;
  int held = 0;
  int partner_phases = 0;
  for (const Phase& p : all) {
    host_us.push_back(static_cast<double>(p.host_held) / 1e3);
    if (p.partner_in_phase) {
      ++partner_phases;
      held += p.release - p.called > 2 * kMs;
      for (const auto& e : sent) {
        if (!e.begun && e.at_ns == p.end_at) {
          after_end_us.push_back(static_cast<double>(p.release - e.sent_ns) / 1e3);
        }
      }
    } else {
      free_us.push_back(static_cast<double>(p.release - p.called) / 1e3);
    }
    // The shim's edges: the nearest of each kind within 7 ms (the phases are 20 ms apart, so
    // that is this phase's edge or none: a phase the shim sent no edge for fails the check).
    constexpr double kMatchUs = 7'000;
    double best_begin = 1e12;
    double best_end = 1e12;
    for (const auto& [e, arrived] : edges) {
      const double err = static_cast<double>(e.at_ns - (e.begun ? p.release : p.done)) / 1e3;
      double& best = e.begun ? best_begin : best_end;
      if (std::abs(err) <= kMatchUs && std::abs(err) < std::abs(best)) best = err;
    }
    if (best_begin < 1e12) begin_err_us.push_back(best_begin);
    if (best_end < 1e12) end_err_us.push_back(best_end);
  }
  const auto abs_all = [](std::vector<double> v) {
    for (double& x : v) x = std::abs(x);
    return v;
  };
  std::printf(
      "turns phases=%d partner_phases=%d held=%d after_end_us_p50=%.1f after_end_us_max=%.1f "
      "free_us_p50=%.1f free_us_max=%.1f host_held_us_p50=%.1f host_held_us_max=%.1f "
      "begin_edge_err_us_p50=%.1f begin_edge_err_us_max=%.1f end_edge_err_us_p50=%.1f "
      "end_edge_err_us_max=%.1f edges=%zu\n",
      phases, partner_phases, held, Percentile(after_end_us, 0.5), Percentile(after_end_us, 1.0),
      Percentile(free_us, 0.5), Percentile(free_us, 1.0), Percentile(host_us, 0.5),
      Percentile(host_us, 1.0), Percentile(abs_all(begin_err_us), 0.5),
      Percentile(abs_all(begin_err_us), 1.0), Percentile(abs_all(end_err_us), 0.5),
      Percentile(abs_all(end_err_us), 1.0), edges.size());
  // Pass: every phase with the partner in its phase held, and went on within 2 ms (median) of
  // the partner's end going out; the others went on at once; the host was never held; the
  // shim's edges are the stream's (within 50 µs at the median: its calibration and a launch).
  const bool ok = partner_phases > 0 && held == partner_phases &&
                  after_end_us.size() == static_cast<size_t>(partner_phases) &&
                  Percentile(after_end_us, 0.0) > -50 && Percentile(after_end_us, 0.5) < 2000 &&
                  Percentile(free_us, 0.5) < 200 && Percentile(host_us, 0.5) < 1000 &&
                  begin_err_us.size() == all.size() && end_err_us.size() == all.size() &&
                  Percentile(abs_all(begin_err_us), 0.5) < 50 &&
                  Percentile(abs_all(end_err_us), 0.5) < 50;
  std::printf("turns %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
