// Which of a job's communicators the gate may hold: the one that carries the iteration's rhythm,
// and only while that rhythm is stable. The scheduler's timetable is made from that
// communicator's profile (the job's reports describe it); holding another one (tensor-parallel
// all-reduces inside the compute, a pipeline stage's sends and receives per micro-batch) would
// delay compute the timetable knows nothing of.
#pragma once

#include <cstddef>

#include "phase_tracker.hpp"

namespace metronome::shim {

// Phases a tracker must have seen before its rhythm is judged (two period windows); until then
// the scheduler's timetable decides alone.
inline constexpr uint64_t kJudgeAfterPhases = 2 * PhaseTracker::kPeriodWindow + 2;
// The share of the recent computes between phases that must agree (PhaseEstimate::regularity):
// an occasional slow iteration passes, alternating kinds of phases do not. (Not the period's
// confidence: the wire's contention and the gate's own holds move the phase starts, and a job
// that is not gated because its starts vary would never get the chance to steady them.)
inline constexpr double kMinRegularity = 0.8;

// False when the communicator has been watched long enough and shows no stable rhythm (its
// computes between phases disagree): it is observed (tracked and reported), never held.
bool MayGate(const PhaseEstimate& e);

// The index of the communicator that carries the job's rhythm among `n` (n > 0): of those with a
// stable period, the longest period (the iteration), and among periods within 5 % of it the
// shortest phase (a burst of communication, not communication spread through the compute);
// when none is stable yet, the one that moves the most bytes a phase.
std::size_t RhythmComm(const PhaseEstimate* const* comms, std::size_t n);

}  // namespace metronome::shim
