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

// The job's choice, kept from one judgement to the next: a communicator that RhythmComm prefers
// to the current one takes over only once it has been preferred through kSwitchAfterPhases of its
// own phases. Each communicator's period lags the gate's holds in its own way for a few
// iterations (a split communicator on the parent's thread sees the parent's holds as compute,
// the parent's median period still holds unheld intervals), and a brief preference must not
// hand the gate a communicator whose calls run through the compute.
inline constexpr uint64_t kSwitchAfterPhases = PhaseTracker::kPeriodWindow + 1;

struct RhythmChoice {
  const void* current = nullptr;     // the communicator that carries the rhythm
  const void* challenger = nullptr;  // the one RhythmComm prefers, if not the current one
  uint64_t challenger_since = 0;     // the challenger's phases when it was first preferred
};

// Updates `choice` from the `n` (> 0) communicators `ids` with their estimates and returns the
// one that carries the rhythm. The first choice is RhythmComm's at once; one that is gone is
// replaced at once.
const void* ChooseRhythm(RhythmChoice& choice, const PhaseEstimate* const* comms,
                         const void* const* ids, std::size_t n);

}  // namespace metronome::shim
