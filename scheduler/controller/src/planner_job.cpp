// The one conversion of a registry job into the planner's input (see plan_snapshot.hpp).
#include <algorithm>
#include <cmath>
#include <set>
#include <span>

#include "metronome/controller/plan_snapshot.hpp"
#include "metronome/planner/model.hpp"

namespace metronome::controller {

namespace pl = metronome::planner;

namespace {

constexpr double kFallbackCapacity = 100e9 / 8.0;  // for jobs that cross no link
// A timetable's longest period (TimetableLimits): a phase whose bytes need longer on the wire is
// planned at it (its windows could not be pushed otherwise).
constexpr int64_t kMaxPlannedPeriod = TimetableLimits{}.max_period_ns;
constexpr int64_t kPeriodGrid = 1'000'000;  // measured periods are rounded up to 1 ms
constexpr double kUnmeasuredJitter = 0.01;  // σ of a job not yet measured, of its period
// A saturating job's wire margin where its phases show less overhead than planning.wire_margin
// (WireMargin): what they show plus this headroom, rounded up to a multiple of the step.
constexpr double kPhaseHeadroom = 0.02;
constexpr double kMarginStep = 0.03;

// The margin over a saturating job's wire time that its window gets: the configured one, or
// less where its median phase is shorter (it ran clean: alone, or in its window with the others
// yielding). With the full margin such a job waits at its gate for the rest of a window it does
// not use, every step: a high-priority job on the testbed's 200 Mbit/s link ran 4.4 % over its
// solo pace (a 193 ms window for 178 ms phases). Steps, so that identical jobs whose medians
// differ a little still get identical windows, and periods that interleave.
double WireMargin(double wire_ns, int64_t median_phase_ns, double configured) {
  if (median_phase_ns <= 0 || !(wire_ns > 0.0)) return configured;
  const double shown = static_cast<double>(median_phase_ns) / wire_ns - 1.0 + kPhaseHeadroom;
  const double stepped = std::ceil(std::max(shown, 0.0) / kMarginStep - 1e-9) * kMarginStep;
  return std::min(configured, stepped);
}

}  // namespace

NodeIndex IndexNodes(const pl::Topology& topology, const std::string& unknown_nodes_link) {
  NodeIndex index;
  for (pl::NodeId n = 0; n < topology.NodeCount(); ++n) {
    index.ids.emplace(topology.NodeName(n), n);
  }
  for (pl::LinkId l = 0; l < topology.LinkCount() && !unknown_nodes_link.empty(); ++l) {
    if (topology.GetLink(l).name == unknown_nodes_link) index.unknown_link = l;
  }
  return index;
}

pl::Job ToPlannerJob(const PlanJob& j, const pl::Topology& topology, const NodeIndex& nodes,
                     const PlanningConfig& config, WireWindow* wire) {
  pl::Job job;
  job.id = j.id;
  job.priority = j.priority;
  std::set<std::string> distinct(j.nodes.begin(), j.nodes.end());
  bool unknown = false;
  for (const auto& name : j.nodes) {
    const auto it = nodes.ids.find(name);
    if (it == nodes.ids.end()) {
      unknown = true;
    } else {
      job.nodes.push_back(it->second);
    }
  }
  if (unknown && distinct.size() >= 2 && nodes.unknown_link) {
    job.extra_links.push_back(*nodes.unknown_link);
  }
  job.profile = ToPlannerProfile(j.profile, j.nodes.size(),
                                 Bottleneck(topology, pl::JobLinks(topology, job)), config, wire);
  if (j.next_phase_ns != 0) job.next_phase_ns = j.next_phase_ns - config.epoch_ns;
  return job;
}

double Bottleneck(const pl::Topology& topology, std::span<const pl::LinkId> links) {
  double min_cap = 0.0;
  for (const pl::LinkId l : links) {
    const double c = topology.GetLink(l).capacity_bps;
    min_cap = min_cap == 0.0 ? c : std::min(min_cap, c);
  }
  return min_cap;
}

pl::JobProfile ToPlannerProfile(const MeasuredProfile& m, std::size_t ranks, double bottleneck_bps,
                                const PlanningConfig& config, WireWindow* wire) {
  if (wire != nullptr) *wire = WireWindow{};
  const double min_cap = bottleneck_bps > 0.0 ? bottleneck_bps : kFallbackCapacity;
  int64_t period = std::max<int64_t>(m.period_ns, 1);
  int64_t comm = std::clamp<int64_t>(m.comm_ns, 1, period);
  // With the bytes known, the window is what the job needs on the wire, not the comm time
  // measured last: that one is inflated by contention while the job is learned ungated. The
  // job's achievable rate is taken from its fastest phase so far (contention only slows
  // phases down); at or near the bottleneck's capacity the job saturates it, and its window is
  // the wire time of its bytes there (a ring all-reduce over n ranks puts 2(n-1)/n of them on
  // each link). A slower job keeps its own pace, with a rectangle lower than the link that
  // may stack. The compute part of the period is what the shim measured between phases (else
  // the period less the phase: medians over different windows, noisy under contention).
  double beta = min_cap;
  if (m.bytes_per_phase > 0) {
    const int64_t compute =
        m.compute_ns > 0 ? std::min(m.compute_ns, period) : std::max<int64_t>(period - comm, 0);
    const int64_t fastest = m.min_comm_ns > 0 ? std::min(m.min_comm_ns, comm) : comm;
    // What crosses each link per phase: a ring all-reduce over n ranks sends 2(n-1)/n of the
    // bytes the call reduces.
    const double n = static_cast<double>(std::max<std::size_t>(ranks, 2));
    const double wire_bytes = static_cast<double>(m.bytes_per_phase) * 2.0 * (n - 1.0) / n;
    beta = wire_bytes * 1e9 / static_cast<double>(fastest);
    comm = fastest;
    if (beta >= config.saturate_fraction * min_cap) {
      beta = min_cap;
      // The wire time and a margin, not the fastest phase when that is shorter: identical jobs
      // then get identical windows (and periods), whichever of them happened to run a fast one.
      // No window is longer than a timetable's longest period (and the cast stays defined).
      const double wire_ns =
          std::min(wire_bytes / min_cap * 1e9, static_cast<double>(kMaxPlannedPeriod));
      const double margin = WireMargin(wire_ns, m.comm_ns, config.wire_margin);
      comm = std::max<int64_t>(static_cast<int64_t>(wire_ns * (1.0 + margin)), 1);
      if (wire != nullptr) *wire = WireWindow{wire_ns, margin};
    }
    // Phases that took persistently longer than that window in a gated slot (traffic the
    // plan does not control slowed them: the controller's overrun rule) get the window they
    // take, or the job walks later every period and waits at its gate.
    comm = std::max(comm, std::min(m.phase_floor_ns, period));
    period = compute + comm;
  }
  // A margin over the measured period, so that jitter does not make the job later than its
  // windows phase after phase; then rounded up to a millisecond, since periods measured to the
  // nanosecond are almost never commensurate and the planner interleaves by their gcd.
  period += static_cast<int64_t>(static_cast<double>(period) * config.period_margin);
  period = std::min(pl::RoundUpPeriod(period, kPeriodGrid), kMaxPlannedPeriod);
  comm = std::min(comm, period);
  pl::JobProfile profile;
  profile.period_ns = period;
  profile.comm_ns = comm;
  profile.beta_bps = std::max(beta, 1.0);
  // A jitter of 0 is not measured yet (the shim needs a few phases for it), not a perfectly
  // periodic job: until it is, the job is planned with kUnmeasuredJitter of its period. With
  // none it got the least cushions, only to lose its place, and its neighbours theirs, when its
  // jitter came a report or two later (a model pair ran 1.9 % slower than without time
  // scheduling for it).
  const int64_t jitter =
      m.jitter_ns > 0 ? m.jitter_ns
                      : static_cast<int64_t>(static_cast<double>(period) * kUnmeasuredJitter);
  profile.jitter_ns = std::clamp<int64_t>(jitter, 1, period);
  return profile;
}

}  // namespace metronome::controller
