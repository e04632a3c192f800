// The device gate kernels, built by nvcc into a fatbin that the shim embeds and loads through the
// driver API. See device_gate.hpp.
#include <cstdint>

#include "device_gate_slot.hpp"
#include "metronome/common/timetable.hpp"
#include "metronome/common/yield.hpp"

namespace {

__device__ __forceinline__ int64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return static_cast<int64_t>(t);
}

}  // namespace

// One thread: decides at the moment the stream reaches it, then spins until the window opens,
// never longer than the timetable's max wait (capped on the host by METRONOME_MAX_WAIT_MS), or,
// for a late phase that realigns, than the cap itself. The gate memory (how many phases ago one
// realigned) lives in the slot: launches on one communicator's stream run one after another.
// `need_ns` is the gap the collective needs between higher-ranked windows; `mid_phase` != 0: a
// collective inside a phase, which yields alone (common's DecideYield).
extern "C" __global__ void metronome_gate_kernel(metronome::shim::DeviceGateSlot* slot,
                                                 int64_t need_ns, uint32_t mid_phase) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const int64_t arrival = GlobalTimerNs();
  slot->launches = slot->launches + 1;
  metronome::Timetable tt;
  metronome::YieldSet yields;
  int64_t server_minus_gpu = 0;
  int64_t cap = 0;
  bool ok = false;
  for (int attempt = 0; attempt < 32 && !ok; ++attempt) {
    const uint32_t s1 = slot->seq;
    __threadfence_system();
    if (s1 & 1u) continue;
    if (slot->valid == 0) return;
    tt.version = static_cast<uint64_t>(slot->version);
    tt.epoch_ns = slot->epoch_ns;
    tt.period_ns = slot->period_ns;
    tt.offset_ns = slot->offset_ns;
    tt.window_ns = slot->window_ns;
    tt.late_slack_ns = slot->late_slack_ns;
    tt.max_wait_ns = slot->max_wait_ns;
    server_minus_gpu = slot->server_minus_gpu_ns;
    cap = slot->max_wait_cap_ns;
    yields.epoch_ns = slot->yield_epoch_ns;
    yields.need_ns = slot->yield_need_ns;
    yields.max_wait_ns = slot->yield_max_wait_ns;
    yields.tolerance_ns = slot->yield_tolerance_ns;
    yields.count = slot->yield_count;
    if (yields.count > metronome::kMaxYieldWindows) yields.count = 0;
    for (uint32_t i = 0; i < yields.count; ++i) {
      yields.windows[i].period_ns = slot->yield_windows[i][0];
      yields.windows[i].offset_ns = slot->yield_windows[i][1];
      yields.windows[i].window_ns = slot->yield_windows[i][2];
    }
    __threadfence_system();
    ok = slot->seq == s1;
  }
  if (!ok || tt.period_ns <= 0) return;  // the host kept writing: go (fail open)
  if ((metronome::ValidateYieldSet(yields) & metronome::kYieldRejectMask) != 0) yields.count = 0;
  const int64_t now_server = metronome::SaturatingAdd(arrival, server_minus_gpu);
  metronome::GateDecision d;
  if (mid_phase != 0) {
    d = metronome::DecideYield(yields, now_server, need_ns, cap);
  } else {
    metronome::GateMemory memory{slot->since_realign};
    d = metronome::DecideRankedGate(tt, yields, now_server, cap, metronome::MustRealign(memory),
                                    need_ns);
    metronome::Remember(memory, d.realigned);
    slot->since_realign = memory.since_realign;
    if (d.realigned) slot->realigned = slot->realigned + 1;
    if (d.action == metronome::GateAction::kFailOpen) {
      slot->failed_open = slot->failed_open + 1;
      return;
    }
  }
  if (d.action != metronome::GateAction::kWaitUntil) return;
  if (d.yielded) slot->yields = slot->yields + 1;
  int64_t target = metronome::SaturatingSub(d.until_ns, server_minus_gpu);
  const int64_t longest = d.realigned || d.yielded ? cap : tt.max_wait_ns;
  const int64_t bound = metronome::SaturatingAdd(arrival, longest);
  if (target > bound) target = bound;
  slot->last_target_gpu_ns = target;
  if (mid_phase == 0) slot->waits = slot->waits + 1;
  int64_t now = GlobalTimerNs();
  while (now < target) {
    if (target - now > 8000) __nanosleep(4000);
    now = GlobalTimerNs();
  }
  slot->last_release_gpu_ns = now;
}

// Calibration: keeps writing the GPU timer into mapped memory until told to stop (bounded).
extern "C" __global__ void metronome_timer_kernel(volatile int64_t* out, volatile uint32_t* stop,
                                                  int64_t bound_ns) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const int64_t start = GlobalTimerNs();
  int64_t now = start;
  while (*stop == 0 && now - start < bound_ns) {
    now = GlobalTimerNs();
    *out = now;
    __threadfence_system();
  }
}
