// What the device gate kernels do, written once for nvcc (gate_kernel.cu, on the GPU's
// %globaltimer) and for the host (the driver stand-in of tests/driver_faults runs the same code on
// a thread with a host clock, so that the kernel's decisions and bounds are tested without a GPU).
#pragma once

#include <cstdint>

#include "device_gate_slot.hpp"
#include "metronome/common/timetable.hpp"
#include "metronome/common/turn.hpp"
#include "metronome/common/yield.hpp"

namespace metronome::shim {

// Kernels of one slot may run at once (a communicator used on two streams: FSDP gathers and
// reduces on two): its counts are added atomically, or one is lost. On the GPU an atomic on
// mapped memory is atomic among the GPU's own threads, which is all this needs (the host only
// reads them).
METRONOME_HD inline void AddTo(volatile uint64_t* count, uint64_t n) {
#if defined(__CUDA_ARCH__)
  atomicAdd(const_cast<unsigned long long*>(reinterpret_cast<volatile unsigned long long*>(count)),
            static_cast<unsigned long long>(n));
#else
  __atomic_fetch_add(const_cast<uint64_t*>(count), n, __ATOMIC_RELAXED);
#endif
}

// The gate: decides at the moment the stream reaches it, then spins until the window opens,
// never longer than the timetable's max wait (capped on the host by METRONOME_MAX_WAIT_MS), or,
// for a late phase that realigns or a yield, than the cap itself. The gate memory (how many
// phases ago one realigned) lives in the slot: launches on one communicator's stream run one
// after another (on two streams at once the counts stay exact, AddTo; the gate memory and the
// edge stamps are then the last kernel's). `need_ns`: the gap the collective needs between
// higher-ranked windows; `rest_ns`: its need and that of the phase's collectives after it (common's
// PhaseRest; -1: unknown); `mid_phase`: a collective inside a phase, which yields alone
// (DecideYield). `arrival`: when the stream reached the launch. `now()` is the GPU timer,
// `pause(ns)` a short sleep, `fence()` a system-wide fence.
template <class Now, class Pause, class Fence>
METRONOME_HD inline void HoldForGate(DeviceGateSlot* slot, int64_t need_ns, int64_t rest_ns,
                                     bool mid_phase, uint32_t generation, int64_t arrival, Now now,
                                     Pause pause, Fence fence) {
  Timetable tt;
  YieldSet yields;
  int64_t server_minus_gpu = 0;
  int64_t cap = 0;
  // A consistent copy under the sequence lock; none after 32 tries (the host kept writing), no
  // timetable, or a launch the watchdog has cancelled: go (fail open).
  bool ok = false;
  bool none = false;
  for (int attempt = 0; !ok && attempt < 32 && slot->cancel == generation; ++attempt) {
    const uint32_t s1 = slot->seq;
    fence();
    if (s1 & 1u) continue;
    if (slot->valid == 0) {
      none = true;
      break;
    }
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
    yields.allowance_ns = slot->yield_allowance_ns;
    yields.count = slot->yield_count;
    if (yields.count > kMaxYieldWindows) yields.count = 0;
    for (uint32_t i = 0; i < yields.count; ++i) {
      yields.windows[i].period_ns = slot->yield_windows[i][0];
      yields.windows[i].offset_ns = slot->yield_windows[i][1];
      yields.windows[i].window_ns = slot->yield_windows[i][2];
    }
    fence();
    ok = slot->seq == s1;
  }
  if (!ok) {
    // A phase that goes because its timetable could not be read is a fail-open like any other
    // (counted, so that a lock the host left odd shows in the reports).
    if (!none && !mid_phase && slot->cancel == generation) {
      AddTo(&slot->failed_open, 1);
      AddTo(&slot->late, 1);  // a fail-open counts late (CountsLate)
    }
    return;
  }
  if (tt.period_ns <= 0) return;
  if ((ValidateYieldSet(yields) & kYieldRejectMask) != 0) yields.count = 0;
  const int64_t now_server = SaturatingAdd(arrival, server_minus_gpu);
  GateDecision d;
  if (mid_phase) {
    d = DecideYield(yields, now_server, need_ns, cap, nullptr, rest_ns);
  } else {
    GateMemory memory{slot->since_realign};
    d = DecideRankedGate(tt, yields, now_server, cap, MustRealign(memory), need_ns, nullptr,
                         rest_ns);
    Remember(memory, d.realigned);
    slot->since_realign = memory.since_realign;
    if (d.realigned) AddTo(&slot->realigned, 1);
    if (d.action == GateAction::kFailOpen) AddTo(&slot->failed_open, 1);
    if (CountsLate(d, tt)) AddTo(&slot->late, 1);
  }
  if (d.action == GateAction::kWaitUntil) {
    if (d.yielded) AddTo(&slot->yields, 1);
    int64_t target = SaturatingSub(d.until_ns, server_minus_gpu);
    const int64_t longest = d.realigned || d.yielded ? cap : tt.max_wait_ns;
    const int64_t bound = SaturatingAdd(arrival, longest);
    if (target > bound) target = bound;
    slot->last_target_gpu_ns = target;
    if (!mid_phase) AddTo(&slot->waits, 1);
    int64_t t = now();
    while (t < target && slot->cancel == generation) {
      if (target - t > 8000) pause(4000);
      t = now();
    }
    slot->last_release_gpu_ns = t;
  }
}

// The partners' turns as the host last wrote them; false: no turns (none, a set that fails
// ValidateTurnSet, or the host kept writing through all the tries).
template <class Fence>
METRONOME_HD inline bool ReadTurns(const DeviceGateSlot* slot, TurnSet& s, int64_t& max_wait_ns,
                                   Fence fence) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    const uint32_t s1 = slot->turn_seq;
    fence();
    if (s1 & 1u) continue;
    s.count = slot->turn_count;
    if (s.count == 0 || s.count > kMaxTurnPartners) return false;
    s.wire_ns = slot->turn_wire_ns;
    s.period_ns = slot->turn_period_ns;
    max_wait_ns = slot->turn_max_wait_ns;
    for (uint32_t i = 0; i < s.count; ++i) {
      TurnPartner& p = s.partners[i];
      p.higher = slot->turn_partners[i][0] != 0;
      p.wire_ns = slot->turn_partners[i][1];
      p.compute_ns = slot->turn_partners[i][2];
      p.begun_ns = slot->turn_partners[i][3];
      p.ended_ns = slot->turn_partners[i][4];
    }
    fence();
    if (slot->turn_seq == s1) return ValidateTurnSet(s) == kTurnOk;
  }
  return false;
}

// After the gate let a phase go: holds it while a partner's turn lasts (common's DecideTurn, on
// the GPU timer: the host wrote the edges on it), reading the edges again every few
// microseconds, then stamps the phase's begin. Bounded by the decision (one natural period from
// the arrival, within max wait), by a step count, and by the watchdog's cancel.
template <class Now, class Pause, class Fence>
METRONOME_HD inline void HoldForTurns(DeviceGateSlot* slot, int64_t arrival, uint32_t generation,
                                      Now now, Pause pause, Fence fence) {
  constexpr int64_t kStepNs = 4000;
  TurnSet s;
  int64_t max_wait = 0;
  const int64_t start = now();
  int64_t t = start;
  bool held = false;
  const int64_t max_steps = TimetableLimits{}.max_wait_cap_ns / kStepNs + 2;
  for (int64_t step = 0;
       step < max_steps && slot->cancel == generation && ReadTurns(slot, s, max_wait, fence);
       ++step) {
    if (!DecideTurn(s, arrival, t, max_wait, slot->turns_in_a_row).hold) break;
    held = true;
    pause(kStepNs);
    t = now();
  }
  slot->turns_in_a_row = held ? slot->turns_in_a_row + 1 : 0;
  if (held) {
    AddTo(&slot->yields, 1);
    slot->turn_wait_ns = slot->turn_wait_ns + (t - start);
  }
  slot->edge_begun_gpu_ns = t;
}

// One gate launch (GateLaunch says what it does). `generation`: the slot's cancel count at
// launch; the kernel leaves as soon as the host's watchdog moves it on.
template <class Now, class Pause, class Fence>
METRONOME_HD inline void RunGateKernel(DeviceGateSlot* slot, int64_t need_ns, int64_t rest_ns,
                                       uint32_t what, uint32_t generation, Now now, Pause pause,
                                       Fence fence) {
  const int64_t arrival = now();
  AddTo(&slot->launches, 1);
  if ((what & kGateDecide) != 0) {
    HoldForGate(slot, need_ns, rest_ns, (what & kGateMidPhase) != 0, generation, arrival, now,
                pause, fence);
  }
  if ((what & kGateTurns) != 0) HoldForTurns(slot, arrival, generation, now, pause, fence);
  fence();
  AddTo(&slot->finished, 1);
}

// After the collective that completes a phase's bytes: the phase's end on the wire.
template <class Now, class Fence>
METRONOME_HD inline void RunEdgeKernel(DeviceGateSlot* slot, Now now, Fence fence) {
  slot->edge_ended_gpu_ns = now();
  fence();
}

// Calibration: keeps writing the GPU timer into mapped memory until told to stop, or for
// `bound_ns` at most.
template <class Now, class Fence>
METRONOME_HD inline void RunTimerKernel(volatile int64_t* out, volatile uint32_t* stop,
                                        int64_t bound_ns, Now now, Fence fence) {
  const int64_t start = now();
  int64_t t = start;
  while (*stop == 0 && t - start < bound_ns) {
    t = now();
    *out = t;
    fence();
  }
}

}  // namespace metronome::shim
