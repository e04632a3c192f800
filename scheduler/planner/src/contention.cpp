// The expected contention on a link (see contention.h).
//
// The ungated load's distribution is computed by dynamic programming over jobs on a grid of
// B/32 (capped at 8·B); the gated profile is swept over the least common multiple of the gated
// periods. When that multiple is huge (periods that are not commensurate, as in the baselines),
// the gated jobs' relative phases drift over time anyway, so they are treated as random too.
//
// Cost: O(m·G) for m ungated jobs and G = 257 grid levels, plus O(s·G) per query for s
// segments of the gated profile.
#include "contention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace metronome::planner::detail {

namespace {
constexpr int kUnitsPerCapacity = 32;
constexpr int kLevels = 8 * kUnitsPerCapacity + 1;
constexpr Nanos kMaxArcs = 200000;
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
  dist_all_ = distribution(random_.size());
  seg_factor_.resize(seg_load_.size());
  for (std::size_t s = 0; s < seg_load_.size(); ++s) {
    double f = 0.0;
    for (std::size_t x = 0; x < dist_all_.size(); ++x) {
      if (dist_all_[x] == 0.0) continue;
      f +=
          dist_all_[x] * std::max(1.0, (seg_load_[s] + static_cast<double>(x) * unit_) / capacity_);
    }
    seg_factor_[s] = f;
  }
}

std::vector<double> LinkContention::distribution(std::size_t skip) const {
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

double LinkContention::mean_factor(const std::vector<double>& dist, double extra, Nanos from,
                                   Nanos to) const {
  // Mean over t ∈ [from, to) (within one hyperperiod) of E[max(1, (extra + G(t) + X) / B)].
  double acc = 0.0;
  Nanos total = 0;
  for (std::size_t s = 0; s + 1 < seg_start_.size(); ++s) {
    const Nanos lo = std::max(from, seg_start_[s]);
    const Nanos hi = std::min(to, seg_start_[s + 1]);
    if (hi <= lo) continue;
    double f = 0.0;
    for (std::size_t x = 0; x < dist.size(); ++x) {
      if (dist[x] == 0.0) continue;
      const double load = extra + seg_load_[s] + static_cast<double>(x) * unit_;
      f += dist[x] * std::max(1.0, load / capacity_);
    }
    acc += f * static_cast<double>(hi - lo);
    total += hi - lo;
  }
  return total > 0 ? acc / static_cast<double>(total) : 1.0;
}

double LinkContention::overload() const {
  double acc = 0.0;
  for (std::size_t s = 0; s + 1 < seg_start_.size(); ++s) {
    double e = 0.0;
    for (std::size_t x = 0; x < dist_all_.size(); ++x) {
      const double load = seg_load_[s] + static_cast<double>(x) * unit_;
      e += dist_all_[x] * std::max(0.0, load - capacity_);
    }
    acc += e * static_cast<double>(seg_start_[s + 1] - seg_start_[s]);
  }
  return acc / static_cast<double>(hyper_) / capacity_;
}

double LinkContention::random_stretch(std::size_t k) const {
  if (k >= random_.size()) return 1.0;
  return mean_factor(distribution(k), random_[k].height, 0, hyper_);
}

double LinkContention::extra_stretch(double height) const {
  return mean_factor(dist_all_, height, 0, hyper_);
}

double LinkContention::gated_stretch(std::size_t i) const {
  if (i >= gated_.size()) return 1.0;
  const GatedArc& g = gated_[i];
  if (!periodic_) return random_stretch(random_.size() - gated_.size() + i);
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
        if (b > a) acc += seg_factor_[k] * static_cast<double>(b - a);
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
