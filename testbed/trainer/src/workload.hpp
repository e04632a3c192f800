// What one iteration does: compute time, gradient size, and its DDP-like buckets.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "options.hpp"

namespace metronome::testbed::trainer {

struct Workload {
  std::string model;  // model key, or "custom"
  std::string gpu;
  double compute_ms = 0;
  std::uint64_t gradient_bytes = 0;
  std::vector<std::uint64_t> buckets;  // bytes, in the order they are all-reduced
  std::string source;                  // where the figures came from
};

// Thrown for options that do not describe a workload (unknown model, no figures, bad sizes).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Workload MakeWorkload(const Options& options);

// DDP's bucketing: the first bucket holds `first` bytes, the others `rest` bytes, the last the
// remainder. Sizes are rounded up to whole float32 elements.
std::vector<std::uint64_t> SplitBuckets(std::uint64_t total, std::uint64_t first,
                                        std::uint64_t rest);

}  // namespace metronome::testbed::trainer
