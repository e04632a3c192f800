#include "profile_input.hpp"

#include <algorithm>
#include <cmath>

namespace metronome::extender {

namespace {

constexpr double kMaxNs = 1e18;     // ~30 years: beyond any period the planner accepts
constexpr double kMaxBytes = 1e18;  // beyond any gradient

// A declared quantity as an integer, saturated into [0, limit] (NaN: 0).
int64_t Saturated(double value, double limit) {
  if (!(value > 0.0)) return 0;
  return static_cast<int64_t>(std::min(value, limit));
}

MeasuredProfile FromCompute(double compute_ms, double gradient_bytes, double nic, int ranks) {
  MeasuredProfile p;
  p.compute_ns = Saturated(compute_ms * 1e6, kMaxNs);
  p.comm_ns =
      std::max<int64_t>(1, Saturated(RingVolume(gradient_bytes, ranks) / nic * 1e9, kMaxNs));
  p.period_ns = std::min<int64_t>(p.compute_ns + p.comm_ns, static_cast<int64_t>(kMaxNs));
  p.bytes_per_phase = static_cast<uint64_t>(Saturated(gradient_bytes, kMaxBytes));
  return p;
}

}  // namespace

double RingVolume(double gradient_bytes, int ranks) {
  const double n = std::max(2, ranks);
  return 2.0 * (n - 1.0) / n * gradient_bytes;
}

MeasuredProfile ProfileFromPeriod(double period_ms, double gradient_mb, double nic, int ranks) {
  MeasuredProfile p = FromCompute(0.0, gradient_mb * 1024.0 * 1024.0, nic, ranks);
  p.period_ns = std::max(p.comm_ns, Saturated(period_ms * 1e6, kMaxNs));
  p.compute_ns = p.period_ns - p.comm_ns;
  return p;
}

std::optional<MeasuredProfile> ProfileFromModel(const std::string& model, const std::string& gpu,
                                                double nic, int ranks,
                                                const models::ModelTable* models) {
  if (models == nullptr || model.empty()) return std::nullopt;
  try {
    return FromCompute(models->ComputeMs(model, gpu),
                       static_cast<double>(models->GradientBytes(model)), nic, ranks);
  } catch (const std::exception&) {
    return std::nullopt;  // unknown model or GPU key
  }
}

std::optional<MeasuredProfile> ProfileFromDeclared(const DeclaredProfile& declared,
                                                   const std::string& gpu, double nic, int ranks,
                                                   const models::ModelTable* models) {
  if (declared.period_ms && declared.gradient_mb) {
    return ProfileFromPeriod(*declared.period_ms, *declared.gradient_mb, nic, ranks);
  }
  return ProfileFromModel(declared.model, gpu, nic, ranks, models);
}

MeasuredProfile ProfileFromMeasured(const MeasuredProfile& measured) {
  MeasuredProfile p = measured;
  p.period_ns = std::max<int64_t>(measured.period_ns, 1);
  p.comm_ns = std::clamp<int64_t>(measured.comm_ns, 1, p.period_ns);
  return p;
}

}  // namespace metronome::extender
