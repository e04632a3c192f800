// The host gate: holds the calling thread until a window opens. It sleeps with clock_nanosleep
// until shortly before the target (the kernel wakes a sleeper 70-80 µs late), then spins on the
// clock for the rest (bench_host_gate: median error 0, p99 ~5 µs on an idle machine).
#pragma once

#include <cstdint>

#include "metronome/common/timetable.hpp"
#include "metronome/common/yield.hpp"

namespace metronome::shim {

inline constexpr int64_t kSpinLeadNs = 200'000;

// Blocks until CLOCK_REALTIME reaches `target_ns` (returns at once if it has), and never longer
// than the wait was when called, whatever steps the clock takes meanwhile. Returns the time at
// release.
int64_t SleepUntilRealtime(int64_t target_ns, int64_t spin_lead_ns = kSpinLeadNs) noexcept;

struct HostGateOutcome {
  GateAction action = GateAction::kGoNow;
  int64_t waited_ns = 0;    // how long the caller was held
  int64_t lateness_ns = 0;  // arrival after the latest window opened (scheduler clock)
  bool realigned = false;   // a late phase held to its next window (common's MustRealign)
  bool yielded = false;     // held for higher-ranked windows (common's yield.hpp)
};

// Decides (common's DecideGate, with the timetable's max wait capped by `max_wait_cap_ns`) and,
// for kWaitUntil, waits. `server_minus_local_ns` converts the local clock to the scheduler's.
// `realign` (common's MustRealign): a late phase waits for the next window if that is within the
// cap, and fails open otherwise.
HostGateOutcome HostGate(const Timetable& tt, int64_t now_local_ns, int64_t server_minus_local_ns,
                         int64_t max_wait_cap_ns, bool may_block, bool realign = false) noexcept;

// Pure decision part of HostGate (for tests): the local time to release at, or now.
GateDecision DecideHostGate(const Timetable& tt, int64_t now_local_ns,
                            int64_t server_minus_local_ns, int64_t max_wait_cap_ns,
                            bool realign = false) noexcept;

// One collective's gate with the windows it yields to (common's yield.hpp): at a phase start
// the ranked gate (DecideRankedGate), inside a phase the yield alone (DecideYield), for the gap
// `need_ns` the collective needs.
struct YieldRequest {
  const YieldSet* yields = nullptr;  // nullptr or count 0: none
  int64_t need_ns = 0;
  bool phase_start = true;
  // The caller's cursor over the windows (common's YieldCursor), following this set
  // (FollowSet); nullptr: none (the same decision, each time from scratch).
  YieldCursor* cursor = nullptr;
  // Its need and that of the phase's collectives after it (common's PhaseRest); -1: unknown.
  int64_t rest_ns = -1;
};
GateDecision DecideHostGate(const Timetable& tt, const YieldRequest& y, int64_t now_local_ns,
                            int64_t server_minus_local_ns, int64_t max_wait_cap_ns,
                            bool realign) noexcept;
HostGateOutcome HostGate(const Timetable& tt, const YieldRequest& y, int64_t now_local_ns,
                         int64_t server_minus_local_ns, int64_t max_wait_cap_ns, bool may_block,
                         bool realign) noexcept;

}  // namespace metronome::shim
