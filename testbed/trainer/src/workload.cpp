#include "workload.hpp"

#include <cmath>

#include "metronome/models/model_table.hpp"

namespace metronome::testbed::trainer {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::uint64_t RoundToElements(std::uint64_t bytes) {
  return (bytes + 3) / 4 * 4;
}

}  // namespace

std::vector<std::uint64_t> SplitBuckets(std::uint64_t total, std::uint64_t first,
                                        std::uint64_t rest) {
  std::vector<std::uint64_t> buckets;
  total = RoundToElements(total);
  first = std::max<std::uint64_t>(RoundToElements(first), 4);
  rest = std::max<std::uint64_t>(RoundToElements(rest), 4);
  std::uint64_t left = total;
  if (left > 0) {
    buckets.push_back(std::min(left, first));
    left -= buckets.back();
  }
  while (left > 0) {
    buckets.push_back(std::min(left, rest));
    left -= buckets.back();
  }
  return buckets;
}

Workload MakeWorkload(const Options& options) {
  Workload w;
  w.gpu = options.gpu;
  if (!options.model.empty()) {
    try {
      const auto table = options.models_file.empty()
                             ? metronome::models::ModelTable::LoadDefault()
                             : metronome::models::ModelTable::Load(options.models_file);
      w.model = options.model;
      w.compute_ms = table.ComputeMs(options.model, options.gpu);
      w.gradient_bytes = table.GradientBytes(options.model);
      w.source = "model table " + table.Path().string();
    } catch (const std::exception& e) {
      throw UsageError(e.what());
    }
  } else {
    if (!options.compute_ms || !options.gradient_mb) {
      throw UsageError("give --model KEY [--gpu KEY], or both --compute-ms and --gradient-mb");
    }
    w.model = "custom";
    w.source = "command line";
  }
  if (options.compute_ms) w.compute_ms = *options.compute_ms;
  if (options.gradient_mb) {
    w.gradient_bytes = static_cast<std::uint64_t>(std::llround(*options.gradient_mb * kMiB));
  }
  if (!(w.compute_ms >= 0) || !(options.compute_scale >= 0) || !(options.gradient_scale >= 0)) {
    throw UsageError("compute time, gradient size and scales must be >= 0");
  }
  if (!(options.first_bucket_mb > 0) || !(options.bucket_mb > 0)) {
    throw UsageError("bucket sizes must be > 0");
  }
  w.compute_ms *= options.compute_scale;
  w.gradient_bytes = static_cast<std::uint64_t>(
      std::llround(static_cast<double>(w.gradient_bytes) * options.gradient_scale));
  w.buckets = SplitBuckets(w.gradient_bytes,
                           static_cast<std::uint64_t>(std::llround(options.first_bucket_mb * kMiB)),
                           static_cast<std::uint64_t>(std::llround(options.bucket_mb * kMiB)));
  w.gradient_bytes = 0;
  for (auto b : w.buckets) w.gradient_bytes += b;
  return w;
}

}  // namespace metronome::testbed::trainer
