// Summary statistics of iteration times.
#pragma once

#include <vector>

namespace metronome::testbed::trainer {

struct Distribution {
  double mean = 0;
  double p50 = 0;
  double p99 = 0;
  double min = 0;
  double max = 0;
};

// Percentiles by the nearest-rank method; all zero for an empty sample.
Distribution Summarize(std::vector<double> sample);

}  // namespace metronome::testbed::trainer
