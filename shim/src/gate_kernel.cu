// The device gate kernels, built by nvcc into a fatbin that the shim embeds and loads through the
// driver API (device_gate.hpp). What they do is gate_kernel_body.hpp, shared with the tests'
// driver stand-in; here they run on the GPU's %globaltimer.
#include <cstdint>

#include "gate_kernel_body.hpp"

namespace {

__device__ __forceinline__ int64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return static_cast<int64_t>(t);
}

}  // namespace

// One thread (the launch has 32; the others leave at once).
extern "C" __global__ void metronome_gate_kernel(metronome::shim::DeviceGateSlot* slot,
                                                 int64_t need_ns, int64_t rest_ns, uint32_t what,
                                                 uint32_t generation) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  metronome::shim::RunGateKernel(
      slot, need_ns, rest_ns, what, generation, [] { return GlobalTimerNs(); },
      [](int64_t ns) { __nanosleep(static_cast<unsigned>(ns)); }, [] { __threadfence_system(); });
}

extern "C" __global__ void metronome_edge_kernel(metronome::shim::DeviceGateSlot* slot) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  metronome::shim::RunEdgeKernel(
      slot, [] { return GlobalTimerNs(); }, [] { __threadfence_system(); });
}

extern "C" __global__ void metronome_timer_kernel(volatile int64_t* out, volatile uint32_t* stop,
                                                  int64_t bound_ns) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  metronome::shim::RunTimerKernel(
      out, stop, bound_ns, [] { return GlobalTimerNs(); }, [] { __threadfence_system(); });
}
