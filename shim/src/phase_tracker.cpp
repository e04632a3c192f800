#include "phase_tracker.hpp"

#include <algorithm>
#include <cmath>

namespace metronome::shim {
namespace {

// A normal distribution's standard deviation over its median absolute deviation.
constexpr double kMadToSigma = 1.4826;

int64_t MedianOf(int64_t* v, size_t n) {
  if (n == 0) return 0;
  std::nth_element(v, v + n / 2, v + n);
  int64_t m = v[n / 2];
  if (n % 2 == 0) {
    const int64_t lo = *std::max_element(v, v + n / 2);
    m = lo + (m - lo) / 2;
  }
  return m;
}

}  // namespace

PhaseTracker::PhaseTracker(int64_t default_gap_threshold_ns)
    : default_threshold_(default_gap_threshold_ns),
      threshold_(default_gap_threshold_ns),
      segmented_with_(default_gap_threshold_ns) {}

void PhaseTracker::Reset() {
  *this = PhaseTracker(default_threshold_);
}

bool PhaseTracker::Add(const CollEvent& e) {
  const Past p{e.start_ns, std::max(e.end_ns, e.start_ns), Key(e.op, e.bytes),
               std::max<int64_t>(e.hold_ns, 0)};
  int64_t gap = -1;
  if (events_ > 0) {
    // From the call's arrival, as the runtime judges a phase start: a pause of the gate
    // between a phase's collectives is no gap between phases.
    gap = std::max<int64_t>(0, p.start - p.hold - last_end_);
    LearnGap(gap);
  }
  const bool start = Segment(p, gap);
  last_end_ = std::max(last_end_, p.end);
  past_.Push(p);
  UpdateThreshold();
  const double ratio = static_cast<double>(std::max<int64_t>(threshold_, 1)) /
                       static_cast<double>(std::max<int64_t>(segmented_with_, 1));
  if (ratio > 1.5 || ratio < 1.0 / 1.5) Resegment();
  return start;
}

bool PhaseTracker::Segment(const Past& e, int64_t gap) {
  bool start = gap < 0 || gap > threshold_;
  if (start && gap >= 0 && first_key_ != 0 && e.key != first_key_ && gap < MergeBelow()) {
    // The sequence says this is not a phase's first collective: unless the gap is as long as
    // the usual gap between phases, it is a bucket waiting for compute inside the phase.
    start = false;
  }
  ++events_;
  if (start) {
    if (gap >= 0) boundary_gaps_.Push(gap);
    if (phases_ > 0) {
      compute_gaps_.Push(std::max<int64_t>(e.start - e.hold - cur_end_, 0));
      ClosePhase();
    }
    ++phases_;
    starts_.Push(e.start);
    arrivals_.Push(e.start - e.hold);
    cur_start_ = e.start;
    cur_end_ = e.end;
    cur_bytes_ = 0;
    cur_ops_ = 0;
    cur_paused_ = 0;
    cur_first_key_ = e.key;
  } else {
    cur_paused_ += e.hold;
  }
  cur_end_ = std::max(cur_end_, e.end);
  cur_bytes_ += KeyBytes(e.key);
  ++cur_ops_;
  return start;
}

void PhaseTracker::Resegment() {
  segmented_with_ = threshold_;
  const uint64_t events = events_;
  const uint64_t phases = phases_;
  starts_.Clear();
  arrivals_.Clear();
  compute_gaps_.Clear();
  durations_.Clear();
  boundary_gaps_.Clear();
  first_keys_.Clear();
  first_key_ = 0;
  events_ = 0;
  phases_ = 0;
  int64_t prev_end = 0;
  for (size_t i = 0; i < past_.Size(); ++i) {
    const Past& e = past_[i];
    Segment(e, i == 0 ? -1 : std::max<int64_t>(0, e.start - e.hold - prev_end));
    prev_end = std::max(prev_end, e.end);
  }
  // Counters keep counting everything seen, not only what is remembered.
  events_ = events;
  if (events > past_.Size()) phases_ = std::max(phases_, phases);
}

void PhaseTracker::ClosePhase() {
  // The gate's pauses between its collectives (yields to higher-ranked windows) are waiting, not
  // the phase's time on the wire: a window sized by them would grow with every yield.
  durations_.Push(std::max<int64_t>(cur_end_ - cur_start_ - cur_paused_, 0));
  last_bytes_ = cur_bytes_;
  last_ops_ = cur_ops_;
  // Signature: settled when the last three phases began with the same collective.
  first_keys_.Push(cur_first_key_);
  if (first_keys_.Size() == 3) {
    const bool same = first_keys_[0] == first_keys_[1] && first_keys_[1] == first_keys_[2];
    first_key_ = same ? first_keys_[0] : 0;
  }
}

void PhaseTracker::UpdateThreshold() {
  if (gaps_.Size() < 3) return;
  int64_t g[kGapHistory];
  const size_t n = gaps_.Size();
  for (size_t i = 0; i < n; ++i) g[i] = std::max(sorted_gaps_[i], kMinGapNs);  // stays sorted
  if (g[n - 1] < 3 * kMinGapNs) {
    threshold_ = default_threshold_;  // back-to-back calls: no structure seen
    return;
  }
  // Split at the largest ratio between consecutive sorted gaps.
  double best = 0.0;
  size_t best_i = n;
  for (size_t i = 0; i + 1 < n; ++i) {
    const double r = static_cast<double>(g[i + 1]) / static_cast<double>(g[i]);
    if (r > best) {
      best = r;
      best_i = i;
    }
  }
  if (best >= 3.0 && best_i < n) {
    threshold_ = static_cast<int64_t>(
        std::sqrt(static_cast<double>(g[best_i]) * static_cast<double>(g[best_i + 1])));
  } else {
    // All gaps alike: every collective is a phase of its own (one collective per iteration).
    threshold_ = g[0] / 2;
  }
}

void PhaseTracker::PushGap(int64_t gap) {
  int64_t* const sorted = sorted_gaps_.data();
  size_t n = gaps_.Size();
  if (n == kGapHistory) {
    // The oldest gap leaves the sorted copy too (one equal value, whichever).
    int64_t* const out = std::lower_bound(sorted, sorted + n, gaps_[0]);
    std::copy(out + 1, sorted + n, out);
    --n;
  }
  int64_t* const in = std::upper_bound(sorted, sorted + n, gap);
  std::copy_backward(in, sorted + n, sorted + n + 1);
  *in = gap;
  gaps_.Push(gap);
}

void PhaseTracker::LearnGap(int64_t gap) {
  const int64_t largest = gaps_.Size() > 0 ? sorted_gaps_[gaps_.Size() - 1] : 0;
  const bool far_above = gaps_.Size() >= kGapHistory / 16 && gap > kPauseFactor * largest;
  if (!far_above) {
    PushGap(gap);
    if (set_aside_ != 0 && ++set_aside_age_ >= kGapHistory) set_aside_ = 0;
    return;
  }
  // A second gap of the same kind while the first is still within the history's reach: a
  // structure that recurs (a slower rhythm), so both are learned.
  if (set_aside_ != 0 && gap < kPauseFactor * set_aside_ && set_aside_ < kPauseFactor * gap) {
    PushGap(set_aside_);
    PushGap(gap);
    set_aside_ = 0;
    return;
  }
  set_aside_ = gap;
  set_aside_age_ = 0;
}

int64_t PhaseTracker::MergeBelow() const {
  if (first_key_ == 0 || boundary_gaps_.Size() < 3) return 0;
  int64_t tmp[kDurationWindow];
  const size_t n = boundary_gaps_.Last(kDurationWindow, tmp);
  return MedianOf(tmp, n) / 2;
}

int64_t PhaseTracker::MedianInterval(double* spread) const {
  int64_t s[kPeriodWindow + 1];
  const size_t n = starts_.Last(kPeriodWindow + 1, s);
  if (n < 2) return 0;
  int64_t iv[kPeriodWindow];
  for (size_t i = 0; i + 1 < n; ++i) iv[i] = s[i + 1] - s[i];
  int64_t copy[kPeriodWindow];
  std::copy(iv, iv + n - 1, copy);
  const int64_t med = MedianOf(copy, n - 1);
  if (spread != nullptr) {
    int64_t dev[kPeriodWindow];
    for (size_t i = 0; i + 1 < n; ++i) dev[i] = std::llabs(iv[i] - med);
    const int64_t mad = MedianOf(dev, n - 1);
    *spread = med > 0 ? static_cast<double>(mad) / static_cast<double>(med) : 1.0;
  }
  return med;
}

// The period the job would have without the gate: from one phase's release to the next phase's
// arrival (compute plus communication, no hold), median over the same window as the period.
int64_t PhaseTracker::MedianNaturalInterval() const {
  int64_t s[kPeriodWindow + 1];
  int64_t a[kPeriodWindow + 1];
  const size_t n = starts_.Last(kPeriodWindow + 1, s);
  const size_t na = arrivals_.Last(kPeriodWindow + 1, a);
  if (n < 2 || na != n) return 0;
  int64_t iv[kPeriodWindow];
  for (size_t i = 0; i + 1 < n; ++i) iv[i] = std::max<int64_t>(a[i + 1] - s[i], 0);
  return MedianOf(iv, n - 1);
}

// The compute between phases: its median, and how much it varies from one iteration to the next
// (what the scheduler's cushions must absorb). Robust (a scaled median absolute deviation) so
// that one stall does not widen every window; needs a few phases.
void PhaseTracker::ComputeStats(int64_t* median, int64_t* sigma) const {
  *median = *sigma = 0;
  int64_t gaps[kJitterWindow];
  const size_t n = compute_gaps_.Last(kJitterWindow, gaps);
  if (n < 4) return;
  int64_t copy[kJitterWindow];
  std::copy(gaps, gaps + n, copy);
  *median = MedianOf(copy, n);
  for (size_t i = 0; i < n; ++i) gaps[i] = std::llabs(gaps[i] - *median);
  *sigma = static_cast<int64_t>(kMadToSigma * static_cast<double>(MedianOf(gaps, n)));
}

double PhaseTracker::Regularity() const {
  int64_t gaps[kStartHistory];
  const size_t n = compute_gaps_.Last(kStartHistory, gaps);
  if (n < 2) return 0.0;
  int64_t copy[kStartHistory];
  std::copy(gaps, gaps + n, copy);
  const int64_t med = MedianOf(copy, n);
  if (med <= 0) return 0.0;
  size_t near = 0;
  for (size_t i = 0; i < n; ++i) near += std::llabs(gaps[i] - med) * 10 <= med;
  return static_cast<double>(near) / static_cast<double>(n);
}

PhaseEstimate PhaseTracker::Estimate() const {
  PhaseEstimate e;
  e.phases = phases_;
  e.events = events_;
  e.gap_threshold_ns = threshold_;
  e.first_key = first_key_;
  e.merge_below_ns = MergeBelow();
  if (starts_.Size() > 0) e.last_start_ns = starts_.Back();
  double spread = 1.0;
  e.period_ns = MedianInterval(&spread);
  e.natural_period_ns = MedianNaturalInterval();
  e.regularity = Regularity();
  ComputeStats(&e.compute_ns, &e.jitter_ns);
  if (e.period_ns > 0) {
    e.next_start_ns = e.last_start_ns + e.period_ns;
    const size_t intervals = std::min(starts_.Size() - 1, kPeriodWindow);
    const double fill = static_cast<double>(intervals) / static_cast<double>(kPeriodWindow);
    // A job whose computes between phases keep their length has a rhythm even while its phases
    // vary with the traffic they meet, which is what its plan removes: the steadier of the two
    // judges it (as MayGate judges by the computes, rhythm.hpp). By the period alone, a job
    // slowed by a crowded link would be planned last, after the jobs it should go before.
    if (e.compute_ns > 0) {
      const double compute_spread =
          static_cast<double>(e.jitter_ns) / kMadToSigma / static_cast<double>(e.compute_ns);
      spread = std::min(spread, compute_spread);
    }
    e.confidence = std::clamp(1.0 - 4.0 * spread, 0.0, 1.0) * fill;
  }
  int64_t d[kDurationWindow];
  const size_t nd = durations_.Last(kDurationWindow, d);
  e.comm_ns = MedianOf(d, nd);
  e.bytes = last_bytes_;
  e.ops = last_ops_;
  return e;
}

size_t PhaseTracker::RecentStarts(int64_t* out, size_t max) const {
  return starts_.Last(max, out);
}

}  // namespace metronome::shim
