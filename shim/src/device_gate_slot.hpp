// The memory the device gate kernel shares with the host: one slot per communicator, in mapped
// (host-pinned, device-visible) memory. Plain C++ so that both the shim and nvcc compile it.
#pragma once

#include <cstdint>

#include "metronome/common/turn.hpp"
#include "metronome/common/yield.hpp"

namespace metronome::shim {

// What one gate launch does (the kernel's `what`).
enum GateLaunch : uint32_t {
  kGateDecide = 1u << 0,    // decide with the timetable and its yields, and hold as they say
  kGateMidPhase = 1u << 1,  // a collective inside a phase: the yields alone
  kGateTurns = 1u << 2,     // a phase start: hold for the partners' turns, stamp the begin edge
};

struct alignas(128) DeviceGateSlot {
  volatile uint32_t seq;    // sequence lock, odd while the host writes
  volatile uint32_t valid;  // 0: no timetable (the kernel returns at once)
  volatile int64_t version;
  volatile int64_t epoch_ns;
  volatile int64_t period_ns;
  volatile int64_t offset_ns;
  volatile int64_t window_ns;
  volatile int64_t late_slack_ns;
  volatile int64_t max_wait_ns;  // already capped by METRONOME_MAX_WAIT_MS
  volatile int64_t server_minus_gpu_ns;
  // Written by the kernel.
  volatile uint64_t launches;
  volatile uint64_t waits;
  volatile uint64_t failed_open;
  volatile int64_t last_release_gpu_ns;
  volatile int64_t last_target_gpu_ns;
  // The stream-memory-operation gate: the stream waits until `release >= ticket`.
  volatile uint32_t release;
  // The kernel's gate memory (common's GateMemory::since_realign) from one phase to the next;
  // UINT32_MAX when the slot is prepared.
  volatile uint32_t since_realign;
  volatile int64_t max_wait_cap_ns;  // METRONOME_MAX_WAIT_MS: no wait is longer, realigning or not
  volatile uint64_t realigned;       // written by the kernel: late phases it held to their window
  // The higher-ranked windows the job yields to (common's YieldSet), under the same sequence
  // lock; the kernel validates them again before use.
  volatile int64_t yield_epoch_ns;
  volatile int64_t yield_need_ns;
  volatile int64_t yield_max_wait_ns;
  volatile int64_t yield_tolerance_ns;
  volatile int64_t yield_allowance_ns;
  volatile uint32_t yield_count;
  volatile int64_t yield_windows[kMaxYieldWindows][3];  // period, offset, window
  volatile uint64_t yields;  // written by the kernel: collectives it held for them
  // Written by the kernel when it leaves (launches - finished: the one running now).
  volatile uint64_t finished;
  // Written by the host's watchdog: a kernel launched with an older generation leaves at once
  // (one stuck past its bound, and every one queued behind it on the stream).
  volatile uint32_t cancel;
  // Taking turns (common's TurnSet), under a sequence lock of their own (edges arrive often and
  // must not make the timetable's readers retry). The host writes the partners' edges already on
  // the GPU's timer (0: none seen); `turn_count` 0: no turns.
  volatile uint32_t turn_seq;
  volatile uint32_t turn_count;
  volatile int64_t turn_wire_ns;
  volatile int64_t turn_period_ns;
  volatile int64_t turn_max_wait_ns;
  volatile int64_t turn_partners[kMaxTurnPartners][5];  // higher, wire, compute, begun, ended
  // Written by the kernel: its phases just before this one that held for a turn, the time it
  // held for turns, and the job's own phase edges on the wire (GPU timer): the begin when a
  // phase-start gate leaves, the end when the edge kernel after the phase's last collective runs.
  volatile uint32_t turns_in_a_row;
  volatile int64_t turn_wait_ns;
  volatile int64_t edge_begun_gpu_ns;
  volatile int64_t edge_ended_gpu_ns;
  // Written by the kernel: the phase starts it counted late, by the host gate's rule (common's
  // CountsLate: failed open, or held to a window it came after; an early arrival is not late).
  volatile uint64_t late;
};

}  // namespace metronome::shim
