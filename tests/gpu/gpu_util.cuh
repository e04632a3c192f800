// What the CUDA check programs share: error checks, the GPU timer, and an independent measure of
// the offset between the GPU timer and the host clock, bracketed from both sides, against which
// the shim's own calibration (one-sided, docs/shim.md "Device gate") is judged.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "metronome/common/clock.hpp"

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

namespace metronome::gpucheck {

__device__ __forceinline__ int64_t GlobalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return static_cast<int64_t>(t);
}

constexpr int kEchoes = 4096;
constexpr int kTicks = 64;

// Mapped (host-pinned, device-visible) memory shared by the probe kernels and the host.
struct ProbeMemory {
  volatile int64_t gpu_now;   // written by the GPU continuously
  volatile int64_t host_now;  // written by the host continuously
  volatile int32_t stop;
  volatile int32_t echoes;
  int64_t seen_host[kEchoes];  // a host clock value the GPU saw ...
  int64_t seen_gpu[kEchoes];   // ... and the GPU timer just after it saw it
  int64_t ticks[kTicks + 1];   // successive distinct GPU timer values
  volatile int32_t n_ticks;
};

// Both directions at once: the GPU publishes its timer (the host reading it later bounds
// host - gpu from above) and echoes every new host clock value it sees, with its timer read just
// after (that bounds host - gpu from below).
__global__ void ProbeKernel(ProbeMemory* p) {
  const int64_t start = GlobalTimer();
  int64_t last = 0;
  int n = 0;
  while (p->stop == 0 && GlobalTimer() - start < 50'000'000) {
    p->gpu_now = GlobalTimer();
    __threadfence_system();
    const int64_t h = p->host_now;
    if (h != last && n < kEchoes) {
      const int64_t g = GlobalTimer();
      p->seen_host[n] = h;
      p->seen_gpu[n] = g;
      ++n;
      last = h;
    }
  }
  p->echoes = n;
}

// The timer's granularity: the first kTicks distinct values it takes.
__global__ void TickKernel(ProbeMemory* p) {
  int64_t last = GlobalTimer();
  const int64_t start = last;
  int n = 0;
  p->ticks[0] = last;
  while (n < kTicks && last - start < 10'000'000) {
    const int64_t t = GlobalTimer();
    if (t != last) {
      p->ticks[++n] = t;
      last = t;
    }
  }
  p->n_ticks = n;
}

struct Bracket {
  int64_t lo = INT64_MIN;  // host - gpu >= lo
  int64_t hi = INT64_MAX;  // host - gpu <= hi
  int samples = 0;
  int64_t mid() const { return lo / 2 + hi / 2; }
  int64_t width() const { return hi - lo; }
};

class Prober {
 public:
  Prober() {
    CHECK_CUDA(cudaHostAlloc(&host_, sizeof(ProbeMemory), cudaHostAllocMapped));
    CHECK_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_), host_, 0));
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }

  // ~3 ms of sampling; the host spins meanwhile.
  Bracket Measure() {
    std::memset(const_cast<ProbeMemory*>(host_), 0, sizeof(ProbeMemory));
    ProbeKernel<<<1, 1, 0, stream_>>>(dev_);
    CHECK_CUDA(cudaGetLastError());
    Bracket b;
    const int64_t start_deadline = RealtimeNs() + 500'000'000;
    while (host_->gpu_now == 0 && RealtimeNs() < start_deadline) {
    }
    const int64_t until = RealtimeNs() + 3'000'000;
    while (RealtimeNs() < until) {
      host_->host_now = RealtimeNs();
      const int64_t g = host_->gpu_now;
      const int64_t h = RealtimeNs();
      if (g != 0) b.hi = std::min(b.hi, h - g);
    }
    host_->stop = 1;
    CHECK_CUDA(cudaStreamSynchronize(stream_));
    for (int i = 0; i < host_->echoes; ++i) {
      b.lo = std::max(b.lo, host_->seen_host[i] - host_->seen_gpu[i]);
    }
    b.samples = host_->echoes;
    return b;
  }

  // Median step of the GPU timer, ns.
  int64_t Tick() {
    std::memset(const_cast<ProbeMemory*>(host_), 0, sizeof(ProbeMemory));
    TickKernel<<<1, 1, 0, stream_>>>(dev_);
    CHECK_CUDA(cudaStreamSynchronize(stream_));
    std::vector<int64_t> d;
    for (int i = 1; i < host_->n_ticks; ++i) d.push_back(host_->ticks[i + 1] - host_->ticks[i]);
    if (d.empty()) return 0;
    std::sort(d.begin(), d.end());
    return d[d.size() / 2];
  }

 private:
  ProbeMemory* host_ = nullptr;
  ProbeMemory* dev_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace metronome::gpucheck
