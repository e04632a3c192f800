#include "profile_report.hpp"

#include <algorithm>

namespace metronome::shim {

void FillProfile(const PhaseTracker& tracker, const PhaseEstimate& e, int64_t server_minus_local_ns,
                 proto::ProfileReport& r) {
  r.iterations = e.phases;
  r.period_ns = e.period_ns;
  r.comm_ns = e.comm_ns;
  r.bytes_per_phase = e.bytes;
  r.collectives_per_phase = e.ops;
  r.confidence = e.confidence;
  int64_t starts[kReportStarts];
  const size_t n = tracker.RecentStarts(starts, kReportStarts);
  r.phase_starts_ns.clear();
  for (size_t i = 0; i < n; ++i) r.phase_starts_ns.push_back(starts[i] + server_minus_local_ns);
  // How much of the period is the gate's holding: the scheduler subtracts it to get the job's
  // ungated rhythm (both medians over the same phases).
  r.hold_ns = e.natural_period_ns > 0
                  ? std::clamp<int64_t>(e.period_ns - e.natural_period_ns, 0, e.period_ns)
                  : 0;
  r.jitter_ns = std::clamp<int64_t>(e.jitter_ns, 0, e.period_ns);
  r.compute_ns = std::clamp<int64_t>(e.compute_ns, 0, e.period_ns);
}

}  // namespace metronome::shim
