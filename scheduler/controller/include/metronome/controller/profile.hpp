// A job's traffic profile as the controller holds it: what its shims measured, and the window
// floor the overrun rule set. The input of one plan (controller::ToPlannerJob turns it into the
// planner's JobProfile); the registry keeps the latest and the one its current plan was made
// with, the extender one per job, and persists it for the job's next run.
#pragma once

#include <cstdint>

namespace metronome::controller {

struct MeasuredProfile {
  int64_t period_ns = 0;         // natural period P (the gate's holds taken out)
  int64_t comm_ns = 0;           // communication phase c, last measured
  uint64_t bytes_per_phase = 0;  // bytes each phase reduces (0: unknown: it saturates its links)
  int64_t min_comm_ns = 0;       // fastest phase so far (0: unknown; reset when the bytes change)
  int64_t compute_ns = 0;        // median compute between phases (0: unknown)
  int64_t jitter_ns = 0;         // σ of the period (0: unknown); widens the job's cushions
  int64_t phase_floor_ns = 0;    // the least window its phases need (0: its wire time)

  friend bool operator==(const MeasuredProfile&, const MeasuredProfile&) = default;
};

}  // namespace metronome::controller
