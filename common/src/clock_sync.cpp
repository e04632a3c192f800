#include "metronome/common/clock_sync.hpp"

#include <algorithm>

#include "metronome/common/timetable.hpp"  // SaturatingSub

namespace metronome {

ClockSync::ClockSync(size_t window) : window_(window == 0 ? 1 : window) {
  samples_.reserve(window_);
}

bool ClockSync::AddSample(const ClockSample& s) {
  // A real exchange has t4 >= t1 and t3 >= t2, the server's time spent inside the client's
  // round trip, and spans far less than the int64 range; the checks saturate, never overflow.
  constexpr int64_t kMaxSpan = int64_t{1} << 50;  // ~13 days
  const int64_t rtt = SaturatingSub(s.t4, s.t1);
  const int64_t server = SaturatingSub(s.t3, s.t2);
  const int64_t skew = SaturatingSub(s.t2, s.t1);
  const bool sane = rtt >= 0 && server >= 0 && rtt < kMaxSpan && server <= rtt &&
                    skew < (int64_t{1} << 61) && skew > -(int64_t{1} << 61);
  if (!sane) {
    ++rejected_;
    return false;
  }
  if (Contradicts(s)) {
    Reset();
    ++steps_;
  }
  if (samples_.size() < window_) {
    samples_.push_back(s);
  } else {
    samples_[next_] = s;
  }
  next_ = (next_ + 1) % window_;
  PickBest();
  return true;
}

namespace {

// |a - b|, saturated (never the undefined |INT64_MIN|).
int64_t Distance(int64_t a, int64_t b) {
  const int64_t d = SaturatingSub(a, b);
  return d == kInt64Min ? kInt64Max : (d < 0 ? -d : d);
}

}  // namespace

bool ClockSync::Contradicts(const ClockSample& s) const {
  if (!HasEstimate()) return false;
  const ClockSample& best = samples_[best_];
  // Both intervals are offset ± delay / 2 (AddSample bounds the delays and offsets far below
  // the int64 range); they must overlap, widened by the drift since.
  const int64_t drift = Distance(s.t1, best.t1) / 1'000'000 * kDriftPpm;
  const int64_t reach = s.Delay() / 2 + best.Delay() / 2 + drift + kStepSlackNs;
  return Distance(s.Offset(), best.Offset()) > reach;
}

void ClockSync::PickBest() {
  best_ = SIZE_MAX;
  for (size_t i = 0; i < samples_.size(); ++i) {
    if (best_ == SIZE_MAX || samples_[i].Delay() < samples_[best_].Delay()) best_ = i;
  }
}

int64_t ClockSync::OffsetNs() const {
  return HasEstimate() ? samples_[best_].Offset() : 0;
}

int64_t ClockSync::DelayNs() const {
  return HasEstimate() ? samples_[best_].Delay() : -1;
}

void ClockSync::Reset() {
  samples_.clear();
  next_ = 0;
  best_ = SIZE_MAX;
}

int64_t ClockPingIntervalNs(uint64_t answered, int64_t silence_ns) {
  constexpr int64_t kSettling = 200'000'000;
  constexpr int64_t kSettled = 2'000'000'000;
  if (answered < kSettlingPings) return kSettling;
  // Two and a half intervals to a silence bound: a pong may come back late by half of one.
  return std::clamp<int64_t>(silence_ns * 2 / 5, kSettling, kSettled);
}

}  // namespace metronome
