// The phase tracker on synthetic call sequences: DDP-like buckets, jitter, an occasional slow
// iteration, a change of rhythm. Period and phase start must be found within 2 %.
#include "phase_tracker.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>
#include "metronome/common/clock.hpp"

namespace metronome::shim {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Generates iterations: compute (with jitter), then buckets, each bucket preceded by `bucket_gap`
// (backward compute between buckets) and lasting bytes / bandwidth on the host.
struct Workload {
  int64_t compute_ns = 80 * kMs;
  int64_t jitter_ns = 500'000;  // uniform +-0.5 ms
  std::vector<uint64_t> buckets = {1 * kMiB, 25 * kMiB, 25 * kMiB, 25 * kMiB};
  int64_t bucket_gap_ns = 3 * kMs;
  double ns_per_byte = 0.2;  // 25 MiB -> ~5 ms
  int64_t slow_every = 0;    // every k-th iteration computes `slow_extra_ns` longer
  int64_t slow_extra_ns = 0;
};

class Sim {
 public:
  explicit Sim(uint64_t seed) : rng_(seed) {}
  // Runs one iteration; returns the start time of its first collective.
  int64_t Iterate(const Workload& w, PhaseTracker& t, int64_t* phase_start_reported = nullptr) {
    std::uniform_int_distribution<int64_t> j(-w.jitter_ns, w.jitter_ns);
    now_ += w.compute_ns + j(rng_);
    ++iter_;
    if (w.slow_every > 0 && iter_ % w.slow_every == 0) now_ += w.slow_extra_ns;
    int64_t first = 0;
    for (size_t b = 0; b < w.buckets.size(); ++b) {
      if (b > 0) now_ += w.bucket_gap_ns;
      const int64_t dur = static_cast<int64_t>(static_cast<double>(w.buckets[b]) * w.ns_per_byte);
      CollEvent e{now_, now_ + dur, 1, w.buckets[b]};
      const bool start = t.Add(e);
      if (b == 0) first = now_;
      if (start && phase_start_reported != nullptr) *phase_start_reported = now_;
      now_ += dur;
    }
    return first;
  }
  int64_t Now() const { return now_; }

 private:
  std::mt19937_64 rng_;
  int64_t now_ = 1'700'000'000 * 1'000'000'000LL;
  int64_t iter_ = 0;
};

int64_t TruePeriod(const Workload& w) {
  int64_t p = w.compute_ns;
  for (size_t b = 0; b < w.buckets.size(); ++b) {
    if (b > 0) p += w.bucket_gap_ns;
    p += static_cast<int64_t>(static_cast<double>(w.buckets[b]) * w.ns_per_byte);
  }
  return p;
}

void ExpectWithin(int64_t got, int64_t want, double frac, const char* what) {
  EXPECT_LE(std::llabs(got - want), static_cast<int64_t>(frac * static_cast<double>(want)))
      << what << ": got " << got << " want " << want;
}

TEST(PhaseTracker, DdpBucketsPeriodAndPhaseStart) {
  Workload w;
  PhaseTracker t;
  Sim sim(1);
  for (int i = 0; i < 8; ++i) sim.Iterate(w, t);
  const int64_t period = TruePeriod(w);
  for (int i = 0; i < 20; ++i) {
    const PhaseEstimate e = t.Estimate();
    int64_t reported = 0;
    const int64_t actual = sim.Iterate(w, t, &reported);
    ExpectWithin(e.period_ns, period, 0.02, "period");
    // Predicted phase start vs the actual one, relative to the period.
    EXPECT_LE(std::llabs(e.next_start_ns - actual), period / 50) << "iteration " << i;
    EXPECT_EQ(reported, actual) << "the phase start is the first bucket";
  }
  const PhaseEstimate e = t.Estimate();
  EXPECT_EQ(e.ops, 4u);
  EXPECT_EQ(e.bytes, 76 * kMiB);
  EXPECT_NE(e.first_key, 0u);
  EXPECT_GT(e.confidence, 0.5);
  // Phase duration: first bucket start to last bucket end.
  const int64_t comm = TruePeriod(w) - w.compute_ns;
  ExpectWithin(e.comm_ns, comm, 0.05, "phase duration");
}

// A job on a crowded link: its computes keep their length, its phases take 5 to 150 ms as the
// traffic they meet comes and goes, and its period varies with them. Its rhythm is still judged
// confident once the period window is full: what varies is what its plan removes. A job whose
// computes vary is not, on a quiet link too.
TEST(PhaseTracker, ConfidentWhenTheComputesAreSteadyAndOnlyThePhasesVary) {
  // ns per byte of the one 25 MiB bucket: its phase's length, in turn.
  const double contention[] = {0.2, 5.7, 0.8, 4.6, 0.4, 5.3, 1.5};
  Workload w;
  w.buckets = {25 * kMiB};
  PhaseTracker crowded;
  Sim sim(3);
  for (const double ns_per_byte : contention) {
    w.ns_per_byte = ns_per_byte;
    sim.Iterate(w, crowded);
  }
  EXPECT_GT(crowded.Estimate().confidence, 0.5);

  PhaseTracker erratic;
  Sim other(4);
  const int64_t computes_ms[] = {40, 160, 70, 130, 50, 150, 90};
  w.ns_per_byte = 0.2;  // an uncrowded link
  for (const int64_t compute_ms : computes_ms) {
    w.compute_ns = compute_ms * kMs;
    other.Iterate(w, erratic);
  }
  EXPECT_LT(erratic.Estimate().confidence, 0.5);
}

TEST(PhaseTracker, FoundAfterAFewIterations) {
  Workload w;
  PhaseTracker t;
  Sim sim(2);
  for (int i = 0; i < 4; ++i) sim.Iterate(w, t);
  const PhaseEstimate e = t.Estimate();
  ExpectWithin(e.period_ns, TruePeriod(w), 0.02, "period after 4 iterations");
}

TEST(PhaseTracker, OccasionalSlowIterationDoesNotMoveThePeriod) {
  Workload w;
  w.slow_every = 7;
  w.slow_extra_ns = 60 * kMs;
  PhaseTracker t;
  Sim sim(3);
  for (int i = 0; i < 10; ++i) sim.Iterate(w, t);
  for (int i = 0; i < 30; ++i) {
    sim.Iterate(w, t);
    ExpectWithin(t.Estimate().period_ns, TruePeriod(w), 0.02, "period with slow iterations");
  }
}

TEST(PhaseTracker, FollowsAChangeOfRhythm) {
  Workload a;
  Workload b = a;
  b.compute_ns = 40 * kMs;
  b.buckets = {1 * kMiB, 10 * kMiB};
  b.jitter_ns = 200'000;
  PhaseTracker t;
  Sim sim(4);
  for (int i = 0; i < 20; ++i) sim.Iterate(a, t);
  ExpectWithin(t.Estimate().period_ns, TruePeriod(a), 0.02, "first rhythm");
  for (int i = 0; i < 5; ++i) sim.Iterate(b, t);
  ExpectWithin(t.Estimate().period_ns, TruePeriod(b), 0.02, "second rhythm after 5 iterations");
  for (int i = 0; i < 5; ++i) {
    const PhaseEstimate e = t.Estimate();
    const int64_t actual = sim.Iterate(b, t);
    EXPECT_LE(std::llabs(e.next_start_ns - actual), TruePeriod(b) / 50);
  }
}

// A checkpoint or an evaluation pauses training for seconds: the iteration after it starts a
// phase as usual, and the pause, one gap far above all the others, does not become the split
// between "inside a phase" and "between phases" (which would merge every remembered iteration
// into one phase and cost the rhythm until the history forgot the pause).
TEST(PhaseTracker, APauseForACheckpointKeepsTheRhythm) {
  Workload w;
  w.buckets = {25 * kMiB, 25 * kMiB};
  PhaseTracker t;
  Sim sim(9);
  for (int i = 0; i < 40; ++i) sim.Iterate(w, t);
  const PhaseEstimate before = t.Estimate();
  ASSERT_GE(before.regularity, 0.9);
  Workload pause = w;
  pause.compute_ns = 5'000 * kMs;
  int64_t reported = 0;
  const int64_t actual = sim.Iterate(pause, t, &reported);
  EXPECT_EQ(reported, actual) << "the iteration after the pause starts a phase";
  for (int i = 0; i < 3; ++i) {
    const PhaseEstimate e = t.Estimate();
    EXPECT_EQ(e.gap_threshold_ns, before.gap_threshold_ns) << "after " << i << " iterations";
    EXPECT_GE(e.regularity, 0.9) << "after " << i << " iterations";
    ExpectWithin(e.period_ns, TruePeriod(w), 0.02, "period after the pause");
    EXPECT_EQ(e.phases, before.phases + 1 + static_cast<uint64_t>(i));
    sim.Iterate(w, t);
  }
}

// Forty buckets a phase: the gap after them comes once in forty, far above every remembered
// one, and is learned as the split all the same once it recurs.
TEST(PhaseTracker, ManyCollectivesAPhase) {
  Workload w;
  w.buckets.assign(40, 4 * kMiB);
  w.bucket_gap_ns = 500 * kUs;
  PhaseTracker t;
  Sim sim(10);
  for (int i = 0; i < 3; ++i) sim.Iterate(w, t);
  const PhaseEstimate e = t.Estimate();
  ExpectWithin(e.period_ns, TruePeriod(w), 0.02, "period after 3 iterations");
  EXPECT_EQ(e.ops, 40u);
}

TEST(PhaseTracker, LongBucketGapIsNotAPhaseStartOnceTheSequenceIsKnown) {
  Workload w;
  w.bucket_gap_ns = 20 * kMs;  // backward compute between buckets, a quarter of the compute
  PhaseTracker t;
  Sim sim(5);
  for (int i = 0; i < 10; ++i) sim.Iterate(w, t);
  const uint64_t phases = t.Estimate().phases;
  for (int i = 0; i < 10; ++i) sim.Iterate(w, t);
  EXPECT_EQ(t.Estimate().phases, phases + 10);
  ExpectWithin(t.Estimate().period_ns, TruePeriod(w), 0.02, "period");
}

TEST(PhaseTracker, OneCollectivePerIteration) {
  Workload w;
  w.buckets = {4 * kMiB};
  w.compute_ns = 30 * kMs;
  PhaseTracker t;
  Sim sim(6);
  for (int i = 0; i < 12; ++i) sim.Iterate(w, t);
  const PhaseEstimate e = t.Estimate();
  ExpectWithin(e.period_ns, TruePeriod(w), 0.02, "period");
  EXPECT_EQ(e.ops, 1u);
}

TEST(PhaseTracker, NaturalPeriodLeavesOutTheGateHolds) {
  // A 100 ms job gated into 150 ms windows: every phase's first call is held ~50 ms (with
  // jitter), and one phase misses its window and is held a whole extra period. The period seen
  // is the gated one; the natural period is the job's own.
  PhaseTracker t;
  const int64_t compute = 80 * kMs;
  const int64_t comm = 20 * kMs;
  const int64_t gated = 150 * kMs;
  int64_t release = 1'000 * kMs;
  for (int i = 0; i < 12; ++i) {
    const int64_t arrival = i == 0 ? release : release + comm + compute;
    if (i > 0) release += (i == 7 ? 2 : 1) * gated;
    const int64_t hold = release - arrival;
    t.Add(CollEvent{release, release + 5 * kMs, 1, kMiB, hold});
    t.Add(CollEvent{release + 5 * kMs, release + comm, 1, 8 * kMiB});
  }
  const PhaseEstimate e = t.Estimate();
  ExpectWithin(e.period_ns, gated, 0.02, "period");
  ExpectWithin(e.natural_period_ns, compute + comm, 0.02, "natural period");
}

TEST(PhaseTracker, PausesBetweenAPhasesCollectivesAreNotItsDuration) {
  // A 40 ms phase of four 10 ms collectives; in every other phase the gate pauses the third
  // one for 30 ms (a higher-ranked window on the wire). The phase's duration is its 40 ms on the
  // wire, not the 55 ms median of its spans, and the pauses do not split it.
  PhaseTracker t;
  const int64_t compute = 100 * kMs;
  int64_t now = 1'000 * kMs;
  for (int i = 0; i < 12; ++i) {
    now += compute;
    for (int c = 0; c < 4; ++c) {
      const int64_t pause = (c == 2 && i % 2 == 1) ? 30 * kMs : 0;
      now += pause;
      t.Add(CollEvent{now, now + 10 * kMs, 1, kMiB, pause});
      now += 10 * kMs;
    }
  }
  const PhaseEstimate e = t.Estimate();
  EXPECT_EQ(e.ops, 4u);
  ExpectWithin(e.comm_ns, 40 * kMs, 0.01, "phase duration");
  ExpectWithin(e.compute_ns, compute, 0.01, "compute");
}

TEST(PhaseTracker, JitterIsTheSpreadOfTheComputeNotOfHoldsOrCommunication) {
  // Compute varies normally with σ = 3 ms; communication varies much more (contention, ±15 ms);
  // the gate holds every phase to a 150 ms grid (so the gated period does not vary at all). One
  // stall of 60 ms must not widen the estimate.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 3.0 * kMs);
  PhaseTracker t;
  std::uniform_int_distribution<int64_t> contention(0, 30 * kMs);
  int64_t release = 1'000 * kMs;
  int64_t comm = 20 * kMs;
  for (int i = 0; i < 40; ++i) {
    int64_t compute = 80 * kMs + static_cast<int64_t>(noise(rng));
    if (i == 30) compute += 60 * kMs;
    const int64_t arrival = i == 0 ? release : release + comm + compute;
    if (i > 0) release += 150 * kMs;
    comm = 10 * kMs + contention(rng);
    t.Add(CollEvent{release, release + 5 * kMs, 1, kMiB, release - arrival});
    t.Add(CollEvent{release + 5 * kMs, release + comm, 1, 8 * kMiB});
  }
  const PhaseEstimate e = t.Estimate();
  EXPECT_GT(e.jitter_ns, 2 * kMs);
  EXPECT_LT(e.jitter_ns, 4 * kMs);
  EXPECT_NEAR(static_cast<double>(e.compute_ns), 80.0 * kMs, 2.0 * kMs);
  PhaseTracker fresh;
  EXPECT_EQ(fresh.Estimate().jitter_ns, 0);  // unknown until a few phases were seen
}

TEST(PhaseTracker, BackToBackCallsKeepTheDefaultThreshold) {
  PhaseTracker t(1 * kMs);
  int64_t now = 0;
  for (int i = 0; i < 100; ++i) {
    t.Add(CollEvent{now, now + 500, 1, 64});
    now += 1 * kUs;
  }
  EXPECT_EQ(t.Estimate().phases, 1u);
  EXPECT_EQ(t.Estimate().gap_threshold_ns, 1 * kMs);
  EXPECT_EQ(t.Estimate().period_ns, 0);
}

TEST(PhaseTracker, RecentStartsOldestFirst) {
  PhaseTracker t;
  Workload w;
  Sim sim(7);
  std::vector<int64_t> firsts;
  firsts.reserve(10);
  for (int i = 0; i < 10; ++i) firsts.push_back(sim.Iterate(w, t));
  int64_t out[4];
  ASSERT_EQ(t.RecentStarts(out, 4), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], firsts[6 + static_cast<size_t>(i)]);
}

}  // namespace
}  // namespace metronome::shim
