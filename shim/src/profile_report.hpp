// What a profile report says of a communicator's rhythm: the shim's client fills its reports with
// it, and the simulator its simulated shims' (one rule for both).
#pragma once

#include <cstdint>

#include "metronome/common/protocol.hpp"
#include "phase_tracker.hpp"

namespace metronome::shim {

// Recent phase starts a report carries (the scheduler dedups those it has seen).
inline constexpr size_t kReportStarts = 16;

// The measured fields of `r` (iterations, period, comm, bytes, confidence, hold, jitter, compute,
// recent phase starts) from `tracker` and its current estimate `e`, the starts moved to the
// scheduler's clock by `server_minus_local_ns`.
void FillProfile(const PhaseTracker& tracker, const PhaseEstimate& e, int64_t server_minus_local_ns,
                 proto::ProfileReport& r);

}  // namespace metronome::shim
