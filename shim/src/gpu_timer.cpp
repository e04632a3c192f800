#include "gpu_timer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "metronome/common/clock.hpp"

namespace metronome::shim {
namespace {

int64_t RealtimeMinusMonotonicNs() {
  return RealtimeNs() - MonotonicNs();
}

}  // namespace

int64_t CalibrateHostMinusGpu(const int64_t* host_ns, const int64_t* gpu_ns, int n) noexcept {
  int64_t best = INT64_MAX;
  for (int i = 0; i < n; ++i) {
    if (gpu_ns[i] == 0) continue;
    best = std::min(best, host_ns[i] - gpu_ns[i]);
  }
  return best == INT64_MAX ? 0 : best;
}

bool GpuTimer::Prepare(const CudaDriver& d, CUmodule mod, char* why, size_t why_size) noexcept {
  CUfunction kernel = nullptr;
  if (d.module_get_function(&kernel, mod, "metronome_timer_kernel") != CUDA_SUCCESS) {
    std::snprintf(why, why_size, "no timer kernel");
    return false;
  }
  CUresult r = d.mem_host_alloc(&host_, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (r != CUDA_SUCCESS) {
    std::snprintf(why, why_size, "no mapped memory, CUDA error %d", static_cast<int>(r));
    return false;
  }
  // Without its device address the kernel would write to address 0: a sticky error that ends
  // the application's CUDA context.
  r = d.mem_host_get_device_pointer(&dev_, host_, 0);
  if (r != CUDA_SUCCESS || dev_ == 0) {
    std::snprintf(why, why_size, "no device address for mapped memory, CUDA error %d",
                  static_cast<int>(r));
    return false;
  }
  kernel_ = kernel;  // Prepared() from here on
  return true;
}

bool GpuTimer::Due(int64_t now, int64_t period_ns, int64_t step_ns, bool& stepped) const noexcept {
  stepped = std::llabs(RealtimeMinusMonotonicNs() - tried_rt_minus_mono_) > step_ns;
  return stepped || now - tried_at_ns_ >= period_ns;
}

bool GpuTimer::Calibrate(const CudaDriver& d, int64_t now, int64_t start_wait_ns, bool may_block,
                         char* why, size_t why_size) noexcept {
  // Tried once a period, whatever comes of it.
  tried_at_ns_ = now;
  tried_rt_minus_mono_ = RealtimeMinusMonotonicNs();
  if (kernel_ == nullptr) {
    std::snprintf(why, why_size, "no timer kernel");
    return false;
  }
  if (queued_ != nullptr) {  // a timer kernel that had not started when it was last asked
    if (d.stream_query == nullptr || d.stream_query(queued_) != CUDA_SUCCESS) {
      std::snprintf(why, why_size, "the last timer kernel is still queued");
      return false;
    }
    d.stream_destroy(queued_);
    queued_ = nullptr;
  }
  CUstream stream = nullptr;
  CUresult r = d.stream_create(&stream, CU_STREAM_NON_BLOCKING);
  if (r != CUDA_SUCCESS) {
    std::snprintf(why, why_size, "no stream, CUDA error %d", static_cast<int>(r));
    return false;
  }
  auto* out = static_cast<volatile int64_t*>(host_);
  auto* stop = reinterpret_cast<volatile uint32_t*>(static_cast<char*>(host_) + 32);
  *out = 0;
  *stop = 0;
  __sync_synchronize();
  CUdeviceptr out_dev = dev_;
  CUdeviceptr stop_dev = dev_ + 32;
  int64_t bound = 300'000'000;  // the kernel stops itself after 300 ms at most
  void* params[] = {&out_dev, &stop_dev, &bound};
  r = d.launch_kernel(kernel_, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr);
  if (r != CUDA_SUCCESS) {
    d.stream_destroy(stream);
    std::snprintf(why, why_size, "the timer kernel does not launch, CUDA error %d",
                  static_cast<int>(r));
    return false;
  }
  constexpr int kSamples = 2000;
  static int64_t hs[kSamples];  // one calibration at a time (the caller's lock)
  static int64_t gs[kSamples];
  int n = 0;
  // Wait for the kernel to start (first launch on a context can take a while), then sample.
  // Bounded on CLOCK_MONOTONIC (a step of the wall clock must not stretch them); the samples
  // pair the GPU's timer with the wall clock.
  const int64_t start_deadline = MonotonicNs() + start_wait_ns;
  while (*out == 0 && MonotonicNs() < start_deadline) {
  }
  const bool started = *out != 0;
  const int64_t deadline = MonotonicNs() + 2'000'000;
  while (started && n < kSamples && MonotonicNs() < deadline) {
    const int64_t h1 = RealtimeNs();
    const int64_t g = *out;
    const int64_t h2 = RealtimeNs();
    if (g != 0 && h2 - h1 < 2'000) {
      hs[n] = h2;
      gs[n] = g;
      ++n;
    }
  }
  *stop = 1;
  __sync_synchronize();
  if (started || may_block || d.stream_query == nullptr) {
    d.stream_synchronize(stream);
    d.stream_destroy(stream);
  } else {
    queued_ = stream;  // the kernel leaves as soon as it runs (its stop word is set)
  }
  if (n < kMinSamples) {
    std::snprintf(why, why_size, "%d fresh reads of its timer in 2 ms, %d needed", n, kMinSamples);
    return false;
  }
  host_minus_gpu_ns_.store(CalibrateHostMinusGpu(hs, gs, n));
  return true;
}

}  // namespace metronome::shim
