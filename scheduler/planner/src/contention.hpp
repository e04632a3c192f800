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

#include "metronome/planner/model.hpp"

namespace metronome::planner::detail {

struct GatedArc {
  Nanos period = 0;
  Nanos offset = 0;
  Nanos window = 0;
  double height = 0.0;
  bool operator==(const GatedArc&) const = default;
};

struct RandomLoad {
  double duty = 0.0;
  double height = 0.0;
  bool operator==(const RandomLoad&) const = default;
};

class LinkContention {
 public:
  LinkContention(double capacity, std::span<const GatedArc> gated,
                 std::span<const RandomLoad> random);
  // E over time of max(0, load − B) / B.
  [[nodiscard]] double Overload() const;
  // Mean factor by which random load k's communication phase is lengthened (≥ 1).
  [[nodiscard]] double RandomStretch(std::size_t k) const;
  // Mean factor by which gated arc i's windows are lengthened (≥ 1).
  [[nodiscard]] double GatedStretch(std::size_t i) const;
  // Mean factor for a hypothetical extra random load of height h (not part of the link).
  [[nodiscard]] double ExtraStretch(double height) const;

 private:
  std::vector<double> Distribution(std::size_t skip) const;  // of the random load, skip one
  // Mean over time of E[max(1, (extra + G(t) + X)/B)] for X distributed as dist.
  double MeanFactor(const std::vector<double>& dist, double extra) const;
  double LevelFactor(std::size_t level) const;  // E[max(1, (G + X)/B)] at gated level

  double capacity_;
  double unit_;
  std::vector<GatedArc> gated_;
  std::vector<RandomLoad> random_;
  bool periodic_ = true;  // the gated profile has a hyperperiod we can sweep
  Nanos hyper_ = 0;
  std::vector<Nanos> seg_start_;  // gated load profile: [seg_start_[i], seg_start_[i+1])
  std::vector<double> seg_load_;
  std::vector<std::size_t> seg_level_;                     // gated load per segment, in grid units
  std::vector<std::pair<std::size_t, Nanos>> level_time_;  // gated level → time spent there
  mutable std::vector<double> level_factor_;               // memo of level_factor, −1 = unknown
  std::vector<double> dist_all_;
};

}  // namespace metronome::planner::detail
