// Synthetic clusters and job mixes (see generator.hpp).
#include "metronome/planner/generator.hpp"

#include <algorithm>
#include <random>

namespace metronome::planner {

namespace {

class Draw {
 public:
  explicit Draw(std::uint64_t seed) : rng_(seed) {}
  double Uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  std::uint64_t Below(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  template <std::size_t N>
  std::size_t Pick(const double (&weights)[N]) {
    double x = Uniform();
    for (std::size_t i = 0; i < N; ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return N - 1;
  }

 private:
  std::mt19937_64 rng_;
};

Job DrawJob(const GeneratorSpec& spec, Draw& d, JobId id) {
  static constexpr double kSizeWeights[] = {0.20, 0.35, 0.25, 0.15, 0.05};
  static constexpr std::uint32_t kSizes[] = {1, 2, 4, 8, 16};
  static constexpr double kPriorityWeights[] = {0.6, 0.3, 0.1};
  static constexpr Nanos kPeriodsMs[] = {100, 120, 150, 200, 250, 300, 400, 500};
  Job job;
  job.id = id;
  job.priority = static_cast<int>(d.Pick(kPriorityWeights));
  const std::uint32_t size = kSizes[d.Pick(kSizeWeights)];
  const std::uint32_t racks = std::max<std::uint32_t>(spec.racks, 1);
  const std::uint32_t per_rack = std::max<std::uint32_t>(spec.nodes_per_rack, 1);
  const bool spread = size > 1 && (size > per_rack || d.Uniform() < spec.cross_rack_share);
  auto rack = static_cast<std::uint32_t>(d.Below(racks));
  auto slot = static_cast<std::uint32_t>(d.Below(per_rack));
  for (std::uint32_t k = 0; k < size; ++k) {
    if (spread && k > 0 && (k % std::max<std::uint32_t>(1, size / 2) == 0 || slot == 0)) {
      rack = static_cast<std::uint32_t>(d.Below(racks));  // jump to another rack
    }
    job.nodes.push_back(rack * per_rack + slot);
    slot = (slot + 1) % per_rack;
  }
  const Nanos period = kPeriodsMs[d.Below(std::size(kPeriodsMs))] * 1'000'000;
  const double duty = 0.05 + 0.25 * d.Uniform();
  job.profile.period_ns = period;
  job.profile.comm_ns = static_cast<Nanos>(duty * static_cast<double>(period));
  job.profile.beta_bps = d.Uniform() < spec.limited_beta_share
                             ? spec.node_uplink_bps * (0.25 + 0.35 * d.Uniform())
                             : spec.node_uplink_bps;
  job.profile.jitter_ns =
      static_cast<Nanos>(spec.compute_jitter * static_cast<double>(period - job.profile.comm_ns));
  return job;
}

}  // namespace

Problem Generate(const GeneratorSpec& spec) {
  Problem p{Topology::TwoTier(
                {spec.racks, spec.nodes_per_rack, spec.node_uplink_bps, spec.rack_uplink_bps}),
            {}};
  Draw d(spec.seed);
  for (std::uint32_t j = 0; j < spec.jobs; ++j) p.jobs.push_back(DrawJob(spec, d, j + 1));
  if (spec.hot_link_jobs > 0) {
    const LinkId hot = p.topology.AddLink("hot", spec.hot_link_bps);
    std::uint32_t left = spec.hot_link_jobs;
    for (Job& job : p.jobs) {
      if (left == 0) break;
      if (job.nodes.size() < 2) continue;
      job.extra_links.push_back(hot);
      --left;
    }
  }
  return p;
}

Job GenerateJob(const GeneratorSpec& spec, const Topology& topology, JobId id, std::uint64_t seed) {
  (void)topology;
  Draw d(seed);
  return DrawJob(spec, d, id);
}

}  // namespace metronome::planner
