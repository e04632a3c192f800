#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace metronome::testbed::trainer {
namespace {

double NearestRank(const std::vector<double>& sorted, double percentile) {
  const auto n = static_cast<double>(sorted.size());
  const auto rank = static_cast<std::size_t>(std::ceil(percentile / 100.0 * n));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

Distribution Summarize(std::vector<double> sample) {
  Distribution d;
  if (sample.empty()) return d;
  std::sort(sample.begin(), sample.end());
  d.mean = std::accumulate(sample.begin(), sample.end(), 0.0) / static_cast<double>(sample.size());
  d.p50 = NearestRank(sample, 50);
  d.p99 = NearestRank(sample, 99);
  d.min = sample.front();
  d.max = sample.back();
  return d;
}

}  // namespace metronome::testbed::trainer
