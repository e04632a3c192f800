// Internal: the expected contention on one link, for plans that leave some traffic ungated.
//
// Gated windows are deterministic (a load profile over the link's hyperperiod); ungated traffic
// (best-effort jobs, or every job without time scheduling) is modelled as independent on/off
// sources: job k is on the wire a fraction d_k of the time, with height h_k, at a phase that
// drifts uniformly. Bandwidth is shared in proportion to demand while the sum exceeds capacity,
// so a job's communication phase lasts max(1, load / B) times longer while overloaded.
#pragma once

#include <span>
#include <vector>

#include "metronome/planner/model.h"

namespace metronome::planner::detail {

struct GatedArc {
  Nanos period = 0;
  Nanos offset = 0;
  Nanos window = 0;
  double height = 0.0;
};

struct RandomLoad {
  double duty = 0.0;
  double height = 0.0;
};

class LinkContention {
 public:
  LinkContention(double capacity, std::span<const GatedArc> gated,
                 std::span<const RandomLoad> random);
  // E over time of max(0, load − B) / B.
  [[nodiscard]] double overload() const;
  // Mean factor by which random load k's communication phase is lengthened (≥ 1).
  [[nodiscard]] double random_stretch(std::size_t k) const;
  // Mean factor by which gated arc i's windows are lengthened (≥ 1).
  [[nodiscard]] double gated_stretch(std::size_t i) const;
  // Mean factor for a hypothetical extra random load of height h (not part of the link).
  [[nodiscard]] double extra_stretch(double height) const;

 private:
  std::vector<double> distribution(std::size_t skip) const;  // of the random load, skip one
  double mean_factor(const std::vector<double>& dist, double extra, Nanos from, Nanos to) const;

  double capacity_;
  double unit_;
  std::vector<GatedArc> gated_;
  std::vector<RandomLoad> random_;
  bool periodic_ = true;  // the gated profile has a hyperperiod we can sweep
  Nanos hyper_ = 0;
  std::vector<Nanos> seg_start_;  // gated load profile: [seg_start_[i], seg_start_[i+1])
  std::vector<double> seg_load_;
  std::vector<double> seg_factor_;  // E[max(1, (G + X)/B)] per segment
  std::vector<double> dist_all_;
};

}  // namespace metronome::planner::detail
