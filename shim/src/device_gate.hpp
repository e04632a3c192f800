// The device gate: holds a collective on its CUDA stream, not the calling thread.
//
// At a phase start the shim enqueues, on the collective's stream, a one-thread kernel that reads
// the GPU's %globaltimer and the job's timetable from mapped host memory (so that a new timetable
// takes effect at once), decides with common's DecideGate at the moment the stream reaches it,
// and spins until the window opens, bounded by max wait. The kernel ships in the shim as a fatbin
// (sm_75, sm_80, sm_90 + compute_90 PTX) and is loaded with the driver API from libcuda.so.1,
// opened at run time: the shim has no link-time CUDA dependency. The GPU timer is calibrated
// against the host clock when the gate is prepared.
//
// GPUs the kernel has no code for (V100 and older: CUDA 13 cannot build sm_70) get a gate made of
// a stream memory operation: cuStreamWaitValue32 on a host-pinned word that the background thread
// writes when the window opens (always within max wait).
//
// The gate kernel also takes turns (common/turn.hpp): at a phase start it holds its stream while
// a partner's turn lasts, reading the relayed edges from mapped memory, and stamps the phase's
// begin; a second one-thread kernel after the phase's last collective stamps its end. The
// background thread sends those stamps as the job's phase edges.
//
// Without libcuda.so.1 or a GPU the shim says so once and uses the host gate.
#pragma once

#include <nccl.h>

#include <cstdint>

#include "device_gate_slot.hpp"
#include "host_gate.hpp"
#include "metronome/common/timetable.hpp"
#include "metronome/common/turn.hpp"
#include "metronome/common/yield.hpp"

namespace metronome::shim {

enum class DeviceGateStatus : int {
  kUnavailable = 0,  // no driver, no GPU, no context, or built without nvcc
  kKernel = 1,       // the spin kernel
  kWaitValue = 2,    // cuStreamWaitValue32 released by the background thread
};

class DeviceGate {
 public:
  static constexpr int kMaxSlots = 256;

  // At communicator creation, on the creating thread (its CUDA context is current). Returns the
  // slot for the communicator, or -1 when the device gate cannot be used (logged once).
  // `max_wait_cap_ns`: METRONOME_MAX_WAIT_MS, the longest any launch holds its stream.
  // `owner`: this use of the slot (a released slot is handed out again); the background thread's
  // writes name it, so that one made from a stale list of communicators is dropped.
  static int Prepare(ncclComm_t comm, int64_t max_wait_cap_ns, uint64_t& owner) noexcept;
  static void ReleaseSlot(int slot) noexcept;
  static DeviceGateStatus Status() noexcept;

  // What Enqueue decided where the host decides (stream waits); the kernel decides on the GPU
  // and counts in its slot (KernelCounters).
  struct HostDecision {
    bool decided = false;  // false: the kernel decides
    GateDecision decision;
  };
  // The caller's path, at a phase start or (with yields) a collective inside one. Returns true when
  // the gate is on the stream (or, where the host decides, when it decided that the phase goes
  // now). Where the host decides, it uses and updates `memory`; the kernel keeps its own in the
  // slot. `y`: the windows to yield to, the gap the collective needs, and whether it starts a phase
  // (inside a phase it yields alone; the gate memory is left as it is).
  // `turns`: at a phase start, the kernel also holds for the partners' turns and stamps the
  // begin edge (the kernel gate only; stream waits take no turns).
  static bool Enqueue(int slot, cudaStream_t stream, const Timetable& tt, const YieldRequest& y,
                      int64_t server_minus_local_ns, int64_t max_wait_ns, GateMemory& memory,
                      HostDecision& decided, bool turns = false) noexcept;

  // Taking turns on the stream (common/turn.hpp), where the calls return once enqueued: at a
  // phase start that the gate did not put a kernel before, a kernel that holds for the partners'
  // turns and stamps the phase's begin; after the collective that completes the phase's bytes,
  // one that stamps its end. False where the context has no gate kernel (nothing enqueued).
  static bool EnqueueTurns(int slot, cudaStream_t stream) noexcept;
  static bool EnqueueEndEdge(int slot, cudaStream_t stream) noexcept;

  // Whether `stream` is being captured into a CUDA graph (false when no CUDA is loaded).
  static bool StreamIsCapturing(cudaStream_t stream) noexcept;

  // Background thread (and the creating thread, for a communicator that joins a job with a
  // timetable). Every writer of a slot's shared memory takes the gate's lock (never on the
  // caller's path), and writes only while `owner` still holds the slot.
  // `tt` nullptr: no gate (the kernel returns at once); else the timetable and its yields.
  static void Publish(int slot, uint64_t owner, const Timetable* tt, const YieldSet& yields,
                      int64_t max_wait_cap_ns) noexcept;
  static void SetServerMinusLocal(int64_t server_minus_local_ns) noexcept;
  // The job's turn set (scheduler clock; nullptr: none), written for the kernel with the
  // partners' edges on the GPU's timer. `max_wait_ns`: the longest a turn holds.
  static void PublishTurns(int slot, uint64_t owner, const TurnSet* turns,
                           int64_t max_wait_ns) noexcept;
  // The phase edges the kernels stamped, on the local clock (0: none yet). False, with no
  // edges: not `owner`'s slot, or its context no longer runs the kernels (the last stamps are
  // not the stream's any more).
  static bool Edges(int slot, uint64_t owner, int64_t& begun_local_ns,
                    int64_t& ended_local_ns) noexcept;
  // Background thread: calibrates the GPU timer of each context that runs the kernels again,
  // every kRecalibrateNs and within kRecalibrateCheckNs of CLOCK_REALTIME stepping by more than
  // kClockStepNs (the timer and the host clock drift apart; a step moves the host clock alone),
  // and rewrites its slots' offsets. Bounded (20 ms for the timer kernel to start, 2 ms of
  // reads, per context); one that fails keeps the last calibration.
  static void Recalibrate(int64_t now_local_ns) noexcept;
  static constexpr int64_t kRecalibrateNs = 30'000'000'000;
  static constexpr int64_t kRecalibrateCheckNs = 1'000'000'000;
  static constexpr int64_t kClockStepNs = 1'000'000;
  // Releases due stream waits and watches the gate kernels (Watch); returns the local time it
  // wants to run again (INT64_MAX: nothing to do).
  static int64_t ServiceWaits(int64_t now_local_ns) noexcept;
  // The watchdog: a gate kernel that holds its stream past the cap (METRONOME_MAX_WAIT_MS) plus
  // kWatchPollNs is released with every kernel of its context's slots (their cancel generations
  // move on, which each kernel queued on a stream also sees), and the context falls back to
  // stream waits, logged once. Returns when to look again while kernels may run.
  static int64_t Watch(int64_t now_local_ns) noexcept;
  static constexpr int64_t kWatchPollNs = 10'000'000;
  static void ReleaseAll() noexcept;
  // Whether the background thread runs ServiceWaits: stream waits are enqueued only while it
  // does (the caller's gate decides on the host otherwise), and every pending one is released
  // when it stops.
  static void ServeWaits(bool serving) noexcept;
  static void ForgetAfterFork() noexcept;

  // What the kernel counted on a slot: phases it held until a window, phases it let go because
  // the next window was beyond max wait, and late phases it held to their next window.
  struct Counters {
    uint64_t waits = 0;
    uint64_t failed_open = 0;
    uint64_t late = 0;  // by the host gate's rule (CountsLate)
    uint64_t realigned = 0;
    uint64_t yields = 0;       // collectives held for higher-ranked windows or partners' turns
    int64_t turn_wait_ns = 0;  // the time held for turns
  };
  static Counters KernelCounters(int slot) noexcept;

  // The calibration (host CLOCK_REALTIME minus GPU %globaltimer), 0 when not calibrated.
  static int64_t HostMinusGpuNs() noexcept;
  // Steps down taken (a driver failure, a stuck kernel, a calibration that failed): each is
  // also logged once.
  static uint64_t Fallbacks() noexcept;

  // Set by the background thread so Enqueue can wake it for a stream-wait release.
  static void SetWakeFd(int fd) noexcept;
};

}  // namespace metronome::shim
