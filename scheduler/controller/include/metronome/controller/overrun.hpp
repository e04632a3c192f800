// The controller's overrun rule, shared by the scheduler service and the simulator.
//
// Gated phases that take longer than their window (slowed by traffic the plan does not control,
// such as drifting best-effort jobs) make the job later every period, and it waits at its gate
// for a window it cannot keep. The rule widens the window to what the phases take when they are
// longer than it by more than the ratio, and follows them back down once they are shorter than
// the widened window by the ratio squared: a band, so that phases that overlap drifting traffic
// only now and then do not widen and narrow the window at every judgement. A widening refused
// before (it would have stretched the job's period) is asked for again only by phases longer
// than the refused window by the ratio.
#pragma once

#include <cstdint>

namespace metronome::controller {

// Phases this much longer than a gated window widen it (the service's controller.overrun_ratio).
inline constexpr double kDefaultOverrunRatio = 1.1;

struct OverrunInputs {
  int64_t phase_ns = 0;    // what the phases take now (a median of recent ones)
  int64_t window_ns = 0;   // the window they run in
  bool gated = false;      // the window is protected (gated, not best-effort, not always open)
  int64_t refused_ns = 0;  // a widening refused since the timetable changed (0: none)
  int64_t floor_ns = 0;    // the window an earlier widening set (0: none; the wire time rules)
};

enum class OverrunMove : uint8_t {
  kNone,
  kWiden,   // the window should become phase_ns
  kNarrow,  // the floor should come down to phase_ns (never below the wire time)
};

// The rule's verdict for one judgement; `ratio` > 1 (0 or less: the rule is off).
[[nodiscard]] OverrunMove JudgeOverrun(const OverrunInputs& in, double ratio);

}  // namespace metronome::controller
