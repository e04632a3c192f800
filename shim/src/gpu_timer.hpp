// The GPU's timer (%globaltimer) against the host clock, for one CUDA context: the gate kernels
// decide on the GPU's timer, the timetables and edges are on the host's (CLOCK_REALTIME). A
// one-thread timer kernel keeps writing the GPU's timer into mapped memory while the host reads
// it; the freshest read bounds the offset best (CalibrateHostMinusGpu).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cuda_driver.hpp"

namespace metronome::shim {

class GpuTimer {
 public:
  // Fewer fresh reads than this in the 2 ms of sampling: the timer kernel did not run alongside
  // the host (the GPU busy, or mapped memory not coherent), and the offset is not known.
  static constexpr int kMinSamples = 16;

  // Once per context (it current): the timer kernel from `mod` and its mapped block. False, with
  // the reason in `why`.
  bool Prepare(const CudaDriver& d, CUmodule mod, char* why, size_t why_size) noexcept;
  [[nodiscard]] bool Prepared() const noexcept { return kernel_ != nullptr; }

  // One calibration at local time `now` (the context current; one at a time, the caller's lock):
  // the timer kernel, started within `start_wait_ns`, is read for 2 ms. On success the offset
  // moves to the new figure; false, with the reason in `why`, keeps the last one. `may_block`:
  // wait for a kernel that did not start to leave; otherwise it is left queued (it leaves as soon
  // as it runs, seeing its stop word) and the next calibration waits until it has.
  bool Calibrate(const CudaDriver& d, int64_t now, int64_t start_wait_ns, bool may_block, char* why,
                 size_t why_size) noexcept;

  // Whether a calibration is due at `now`: `period_ns` after the last try, or sooner where
  // CLOCK_REALTIME stepped by more than `step_ns` since (a step moves the host clock alone).
  // `stepped` says which.
  [[nodiscard]] bool Due(int64_t now, int64_t period_ns, int64_t step_ns,
                         bool& stepped) const noexcept;

  // host - gpu in ns (0 until calibrated); read anywhere.
  [[nodiscard]] int64_t HostMinusGpuNs() const noexcept { return host_minus_gpu_ns_.load(); }

 private:
  std::atomic<int64_t> host_minus_gpu_ns_{0};
  int64_t tried_at_ns_ = 0;          // local time of the last try
  int64_t tried_rt_minus_mono_ = 0;  // CLOCK_REALTIME - CLOCK_MONOTONIC then
  CUfunction kernel_ = nullptr;
  void* host_ = nullptr;  // mapped: the timer's word at 0, its stop word at 32
  CUdeviceptr dev_ = 0;
  CUstream queued_ = nullptr;  // a timer kernel's stream while that kernel had not started
};

// Calibration math (host-testable): the GPU keeps writing its timer into mapped memory and the
// host reads it. A value was written before it was read, so each pair (host time at the read,
// GPU value read) bounds host - gpu from above; the smallest bound (the freshest read) is the
// estimate.
int64_t CalibrateHostMinusGpu(const int64_t* host_ns, const int64_t* gpu_ns, int n) noexcept;

}  // namespace metronome::shim
