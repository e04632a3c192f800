// The expected contention on a link (see contention.hpp).
//
// The ungated load's distribution is computed by dynamic programming over jobs on a grid of
// B/32 (capped at 8·B); the gated profile is swept over the least common multiple of the gated
// periods. When that multiple holds more than kMaxArcs (4,096) windows (periods that are not
// commensurate, as in the baselines, or on a 1 ms grid but unrelated), the gated jobs' relative
// phases sweep the circle anyway, so they are treated as random too.
//
// Cost: O(m·G) for m ungated jobs and G = 257 grid levels, plus O(s·G) per query for s
// segments of the gated profile.
#include "contention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace metronome::planner::detail {

namespace {
constexpr int kUnitsPerCapacity = 32;
constexpr int kLevels = 8 * kUnitsPerCapacity + 1;
constexpr Nanos kMaxArcs = 4096;
}  // namespace

LinkContention::LinkContention(double capacity, std::span<const GatedArc> gated,
                               std::span<const RandomLoad> random)
    : capacity_(capacity),
      unit_(capacity / kUnitsPerCapacity),
      gated_(gated.begin(), gated.end()),
      random_(random.begin(), random.end()) {
  // Hyperperiod of the gated windows.
  Nanos l = 1;
  Nanos arcs = 0;
  for (const GatedArc& g : gated_) {
    if (g.period <= 0) continue;
    const Nanos gcd = std::gcd(l, g.period);
    if (l / gcd > std::numeric_limits<Nanos>::max() / g.period) {
      periodic_ = false;
      break;
    }
    l = l / gcd * g.period;
  }
  if (periodic_) {
    for (const GatedArc& g : gated_) arcs += g.period > 0 ? l / g.period : 0;
    periodic_ = arcs <= kMaxArcs;
  }
  if (!periodic_) {  // drifting phases: the gated jobs become random sources too
    for (const GatedArc& g : gated_) {
      random_.push_back({static_cast<double>(g.window) / static_cast<double>(g.period), g.height});
    }
    l = 1;
  }
  hyper_ = std::max<Nanos>(l, 1);
  std::vector<std::pair<Nanos, double>> events{{0, 0.0}};
  if (periodic_) {
    for (const GatedArc& g : gated_) {
      for (Nanos t = 0; t < hyper_; t += g.period) {
        const Nanos s = ((g.offset + t) % hyper_ + hyper_) % hyper_;
        const Nanos e = s + g.window;
        events.emplace_back(s, g.height);
        if (e <= hyper_) {
          events.emplace_back(e, -g.height);
        } else {
          events.emplace_back(hyper_, -g.height);
          events.emplace_back(0, g.height);
          events.emplace_back(e - hyper_, -g.height);
        }
      }
    }
  }
  std::sort(events.begin(), events.end());
  double load = 0.0;
  std::size_t i = 0;
  while (i < events.size()) {
    const Nanos at = events[i].first;
    while (i < events.size() && events[i].first == at) load += events[i++].second;
    if (at >= hyper_) break;
    seg_start_.push_back(at);
    seg_load_.push_back(std::max(0.0, load));
  }
  seg_start_.push_back(hyper_);
  dist_all_ = Distribution(random_.size());
  // The gated profile as a histogram of load levels (few distinct levels: 0, B, a stack...).
  std::vector<Nanos> time_at(kLevels, 0);
  for (std::size_t k = 0; k < seg_load_.size(); ++k) {
    const auto level =
        static_cast<std::size_t>(std::min<long>(kLevels - 1, std::lround(seg_load_[k] / unit_)));
    seg_level_.push_back(level);
    time_at[level] += seg_start_[k + 1] - seg_start_[k];
  }
  for (std::size_t g = 0; g < time_at.size(); ++g) {
    if (time_at[g] > 0) level_time_.emplace_back(g, time_at[g]);
  }
  level_factor_.assign(kLevels, -1.0);
}

std::vector<double> LinkContention::Distribution(std::size_t skip) const {
  if (skip < random_.size() && !dist_all_.empty() && random_[skip].duty <= 0.5) {
    // Leave one source out of the full distribution: divide by (1 − d + d·z^a). The forward
    // recursion is exact below the lumped top level and stable for d ≤ 1/2.
    const double d = std::clamp(random_[skip].duty, 0.0, 1.0);
    const int a = std::max(1, static_cast<int>(std::lround(random_[skip].height / unit_)));
    std::vector<double> q(kLevels, 0.0);
    double below = 0.0;
    for (int x = 0; x + 1 < kLevels; ++x) {
      const double from = x >= a ? d * q[static_cast<std::size_t>(x - a)] : 0.0;
      q[static_cast<std::size_t>(x)] =
          std::max(0.0, (dist_all_[static_cast<std::size_t>(x)] - from) / (1.0 - d));
      below += q[static_cast<std::size_t>(x)];
    }
    q[kLevels - 1] = std::max(0.0, 1.0 - below);
    return q;
  }
  std::vector<double> dist(kLevels, 0.0);
  std::vector<double> next(kLevels);
  dist[0] = 1.0;
  for (std::size_t k = 0; k < random_.size(); ++k) {
    if (k == skip) continue;
    const double d = std::clamp(random_[k].duty, 0.0, 1.0);
    const int a = std::max(1, static_cast<int>(std::lround(random_[k].height / unit_)));
    std::fill(next.begin(), next.end(), 0.0);
    for (int x = 0; x < kLevels; ++x) {
      if (dist[static_cast<std::size_t>(x)] == 0.0) continue;
      next[static_cast<std::size_t>(x)] += (1.0 - d) * dist[static_cast<std::size_t>(x)];
      next[static_cast<std::size_t>(std::min(kLevels - 1, x + a))] +=
          d * dist[static_cast<std::size_t>(x)];
    }
    dist.swap(next);
  }
  return dist;
}

double LinkContention::MeanFactor(const std::vector<double>& dist, double extra) const {
  double acc = 0.0;
  for (const auto& [level, time] : level_time_) {
    const double g = static_cast<double>(level) * unit_ + extra;
    double f = 0.0;
    for (std::size_t x = 0; x < dist.size(); ++x) {
      if (dist[x] == 0.0) continue;
      f += dist[x] * std::max(1.0, (g + static_cast<double>(x) * unit_) / capacity_);
    }
    acc += f * static_cast<double>(time);
  }
  return acc / static_cast<double>(hyper_);
}

double LinkContention::LevelFactor(std::size_t level) const {
  double& memo = level_factor_[level];
  if (memo < 0) {
    double f = 0.0;
    const double g = static_cast<double>(level) * unit_;
    for (std::size_t x = 0; x < dist_all_.size(); ++x) {
      if (dist_all_[x] == 0.0) continue;
      f += dist_all_[x] * std::max(1.0, (g + static_cast<double>(x) * unit_) / capacity_);
    }
    memo = f;
  }
  return memo;
}

double LinkContention::Overload() const {
  double acc = 0.0;
  for (const auto& [level, time] : level_time_) {
    double e = 0.0;
    for (std::size_t x = 0; x < dist_all_.size(); ++x) {
      if (dist_all_[x] == 0.0) continue;
      const double load = static_cast<double>(level + x) * unit_;
      e += dist_all_[x] * std::max(0.0, load - capacity_);
    }
    acc += e * static_cast<double>(time);
  }
  return acc / static_cast<double>(hyper_) / capacity_;
}

double LinkContention::RandomStretch(std::size_t k) const {
  if (k >= random_.size()) return 1.0;
  return MeanFactor(Distribution(k), random_[k].height);
}

double LinkContention::ExtraStretch(double height) const {
  return MeanFactor(dist_all_, height);
}

double LinkContention::GatedStretch(std::size_t i) const {
  if (i >= gated_.size()) return 1.0;
  const GatedArc& g = gated_[i];
  if (!periodic_) return RandomStretch(random_.size() - gated_.size() + i);
  if (g.window <= 0) return 1.0;
  // Average over its windows in one hyperperiod; G(t) already includes its own height.
  double acc = 0.0;
  Nanos total = 0;
  for (Nanos t = 0; t < hyper_; t += g.period) {
    const Nanos s = ((g.offset + t) % hyper_ + hyper_) % hyper_;
    const Nanos e = s + g.window;
    auto part = [&](Nanos lo, Nanos hi) {
      auto it = std::upper_bound(seg_start_.begin(), seg_start_.end(), lo);
      for (auto k = static_cast<std::size_t>(it - seg_start_.begin()) - 1;
           k + 1 < seg_start_.size() && seg_start_[k] < hi; ++k) {
        const Nanos a = std::max(lo, seg_start_[k]);
        const Nanos b = std::min(hi, seg_start_[k + 1]);
        if (b > a) acc += LevelFactor(seg_level_[k]) * static_cast<double>(b - a);
      }
      total += hi - lo;
    };
    if (e <= hyper_) {
      part(s, e);
    } else {
      part(s, hyper_);
      part(0, e - hyper_);
    }
  }
  return total > 0 ? acc / static_cast<double>(total) : 1.0;
}

}  // namespace metronome::planner::detail
