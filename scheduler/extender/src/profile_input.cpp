#include "profile_input.hpp"

#include <algorithm>
#include <cmath>

namespace metronome::extender {

double RingVolume(double gradient_bytes, int ranks) {
  const double n = std::max(2, ranks);
  return 2.0 * (n - 1.0) / n * gradient_bytes;
}

namespace {

controller::PlanJob FromCompute(double compute_ms, double gradient_bytes, double nic, int ranks) {
  controller::PlanJob j;
  j.profile.compute_ns = std::max<int64_t>(0, std::llround(compute_ms * 1e6));
  j.profile.comm_ns =
      std::max<int64_t>(1, std::llround(RingVolume(gradient_bytes, ranks) / nic * 1e9));
  j.profile.period_ns = j.profile.compute_ns + j.profile.comm_ns;
  j.profile.bytes_per_phase = static_cast<uint64_t>(std::max(0.0, gradient_bytes));
  return j;
}

}  // namespace

controller::PlanJob InputFromPeriod(double period_ms, double gradient_mb, double nic, int ranks) {
  controller::PlanJob j = FromCompute(0.0, gradient_mb * 1024.0 * 1024.0, nic, ranks);
  j.profile.period_ns = std::max<int64_t>(j.profile.comm_ns, std::llround(period_ms * 1e6));
  j.profile.compute_ns = j.profile.period_ns - j.profile.comm_ns;
  return j;
}

std::optional<controller::PlanJob> InputFromModel(const std::string& model, const std::string& gpu,
                                                  double nic, int ranks,
                                                  const models::ModelTable* models) {
  if (models == nullptr || model.empty()) return std::nullopt;
  try {
    return FromCompute(models->computeMs(model, gpu),
                       static_cast<double>(models->gradientBytes(model)), nic, ranks);
  } catch (const std::exception&) {
    return std::nullopt;  // unknown model or GPU key
  }
}

std::optional<controller::PlanJob> InputFromDeclared(const DeclaredProfile& declared,
                                                     const std::string& gpu, double nic, int ranks,
                                                     const models::ModelTable* models) {
  if (declared.period_ms && declared.gradient_mb) {
    return InputFromPeriod(*declared.period_ms, *declared.gradient_mb, nic, ranks);
  }
  return InputFromModel(declared.model, gpu, nic, ranks, models);
}

controller::PlanJob InputFromMeasured(const MeasuredProfile& measured) {
  controller::PlanJob j;
  j.profile = measured;
  j.profile.period_ns = std::max<int64_t>(measured.period_ns, 1);
  j.profile.comm_ns = std::clamp<int64_t>(measured.comm_ns, 1, j.profile.period_ns);
  return j;
}

}  // namespace metronome::extender
