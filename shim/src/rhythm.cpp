#include "rhythm.hpp"

namespace metronome::shim {
namespace {

bool Stable(const PhaseEstimate& e) {
  return e.phases >= kJudgeAfterPhases && e.period_ns > 0 && e.regularity >= kMinRegularity;
}

}  // namespace

bool MayGate(const PhaseEstimate& e) {
  return e.phases < kJudgeAfterPhases || Stable(e);
}

std::size_t RhythmComm(const PhaseEstimate* const* comms, std::size_t n) {
  int64_t longest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (Stable(*comms[i]) && comms[i]->period_ns > longest) longest = comms[i]->period_ns;
  }
  std::size_t best = 0;
  bool found = false;
  for (std::size_t i = 0; i < n; ++i) {
    const PhaseEstimate& e = *comms[i];
    if (longest > 0) {
      if (!Stable(e) || e.period_ns * 100 < longest * 95) continue;
      if (!found || e.comm_ns < comms[best]->comm_ns) best = i;
    } else if (!found || e.bytes > comms[best]->bytes) {
      best = i;
    }
    found = true;
  }
  return best;
}

const void* ChooseRhythm(RhythmChoice& choice, const PhaseEstimate* const* comms,
                         const void* const* ids, std::size_t n) {
  const std::size_t best = RhythmComm(comms, n);
  bool current_present = false;
  for (std::size_t i = 0; i < n; ++i) current_present |= ids[i] == choice.current;
  if (!current_present || ids[best] == choice.current) {
    choice.current = ids[best];
    choice.challenger = nullptr;
    return choice.current;
  }
  if (choice.challenger != ids[best]) {
    choice.challenger = ids[best];
    choice.challenger_since = comms[best]->phases;
  } else if (comms[best]->phases >= choice.challenger_since + kSwitchAfterPhases) {
    choice.current = ids[best];
    choice.challenger = nullptr;
  }
  return choice.current;
}

}  // namespace metronome::shim
