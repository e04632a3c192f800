// A seeded generator of synthetic clusters and job mixes, for benchmarks, property tests and
// the simulator's large scenarios. Deterministic for a given spec (std::mt19937_64 and
// hand-rolled distributions, so the result does not depend on the standard library).
#pragma once

#include <cstdint>

#include "metronome/planner/model.hpp"

namespace metronome::planner {

struct GeneratorSpec {
  std::uint32_t racks = 64;
  std::uint32_t nodes_per_rack = 8;
  std::uint32_t jobs = 1000;
  std::uint64_t seed = 42;
  double node_uplink_bps = 12.5e9;  // 100 Gb/s
  double rack_uplink_bps = 50e9;    // 400 Gb/s
  double cross_rack_share = 0.3;    // multi-node jobs spread over several racks
  double limited_beta_share = 0.2;  // jobs whose β is below the node uplink (they may stack)
  double compute_jitter = 0.0;  // σ of each job's compute phase, relative (JobProfile::jitter_ns)
  // A hot spot: the first `hot_link_jobs` multi-node jobs also cross one explicit link named
  // "hot" (a spine or aggregation link that many jobs' rings happen to cross) of this capacity.
  std::uint32_t hot_link_jobs = 0;
  double hot_link_bps = 800e9;  // 6.4 Tb/s
};

// Job sizes 1/2/4/8/16 nodes (20/35/25/15/5 %), priorities 0/1/2 (60/30/10 %), natural periods
// from {100, 120, 150, 200, 250, 300, 400, 500} ms, duty cycles uniform in [0.05, 0.3].
[[nodiscard]] Problem Generate(const GeneratorSpec& spec);

// One more job drawn like the others (for "add one job" and what-if), with the given id.
[[nodiscard]] Job GenerateJob(const GeneratorSpec& spec, const Topology& topology, JobId id,
                              std::uint64_t seed);

}  // namespace metronome::planner
