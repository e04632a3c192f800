#include "metronome/controller/overrun.hpp"

namespace metronome::controller {

OverrunMove JudgeOverrun(const OverrunInputs& in, double ratio) {
  if (ratio <= 0.0) return OverrunMove::kNone;
  const double phase = static_cast<double>(in.phase_ns);
  if (in.gated && phase > ratio * static_cast<double>(in.window_ns) &&
      phase > ratio * static_cast<double>(in.refused_ns)) {
    return OverrunMove::kWiden;
  }
  if (in.floor_ns > 0 && phase * (ratio * ratio) < static_cast<double>(in.floor_ns)) {
    return OverrunMove::kNarrow;
  }
  return OverrunMove::kNone;
}

}  // namespace metronome::controller
