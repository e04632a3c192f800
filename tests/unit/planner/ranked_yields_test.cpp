// RankedYields on hand-built plans: who yields to whom, and the parts a yielder's collectives are
// issued in.
#include "metronome/planner/ranked_yields.hpp"

#include <gtest/gtest.h>

#include "planner_test_util.hpp"

namespace metronome::planner {
namespace {

using testing::kMs;
using testing::MakeJob;

// A high-priority job gated in an 80 ms window every 280 ms and a low-priority one drifting
// (best-effort, ungated), both on one link of `capacity` bytes per second.
struct Pair {
  explicit Pair(double capacity, int low_priority = 0) : topology(testing::Links(1, capacity)) {
    jobs = {MakeJob(1, 3, 280, 80, {0}), MakeJob(2, low_priority, 300, 100, {0})};
    for (Job& j : jobs) j.profile.beta_bps = capacity;
    JobPlan high;
    high.id = 1;
    high.timetable = MakeTimetable(280 * kMs, 0, 80 * kMs, 10 * kMs, false);
    JobPlan low;
    low.id = 2;
    low.best_effort = true;
    low.timetable = MakeTimetable(300 * kMs, 0, 300 * kMs, 0, true);
    plan.jobs = {high, low};
  }
  Topology topology;
  std::vector<Job> jobs;
  Plan plan;
};

TEST(RankedYields, ALowerJobYieldsToTheHigherWindowInPartsOfASixteenthOfIt) {
  const Pair slow(1.25e9);  // 10 Gbit/s
  const PlannerOptions options;
  const auto y = RankedYields(slow.topology, slow.jobs, slow.plan, options);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_EQ(y[0].yields.count, 0u) << "the high job yields to nothing";
  EXPECT_EQ(y[0].yields.chunk_bytes, 0u) << "and splits nothing";
  ASSERT_EQ(y[1].yields.count, 1u);
  const YieldWindow& w = y[1].yields.windows[0];
  EXPECT_EQ(w.period_ns, 280 * kMs);
  EXPECT_GE(w.window_ns, 80 * kMs);  // the window and the part of its cushion jitter may take
  // A sixteenth of the window on the wire of a 10 Gbit/s link, where a ring all-reduce puts up
  // to twice its bytes: a part of about 3 MB (a 25 MB bucket in 9 parts).
  const auto expect =
      static_cast<uint64_t>(static_cast<double>(w.window_ns) / 16 * 1e-9 * 1.25e9 / 2);
  EXPECT_EQ(y[1].yields.chunk_bytes, expect);
  EXPECT_EQ(ChunkParts(25u << 20, y[1].yields.chunk_bytes), 9u);

  // Ten times the capacity: parts ten times larger (a 25 MB bucket stays whole).
  const Pair fast(12.5e9);
  const auto f = RankedYields(fast.topology, fast.jobs, fast.plan, options);
  EXPECT_NEAR(static_cast<double>(f[1].yields.chunk_bytes),
              10.0 * static_cast<double>(y[1].yields.chunk_bytes), 16.0);
  EXPECT_EQ(ChunkParts(25u << 20, f[1].yields.chunk_bytes), 1u);
}

TEST(RankedYields, JobsOfOnePriorityDoNotYieldToEachOther) {
  const Pair peers(1.25e9, 3);
  const auto y = RankedYields(peers.topology, peers.jobs, peers.plan, PlannerOptions{});
  EXPECT_EQ(y[1].yields.count, 0u);
  EXPECT_EQ(y[1].yields.chunk_bytes, 0u);
}

TEST(RankedYields, APartSpendsAtLeastHalfAMillisecondOnTheWire) {
  // A 6 ms window: a sixteenth of it is 375 µs, less than the floor.
  Pair short_window(1.25e9);
  short_window.plan.jobs[0].timetable = MakeTimetable(280 * kMs, 0, 6 * kMs, 0, false);
  const auto y =
      RankedYields(short_window.topology, short_window.jobs, short_window.plan, PlannerOptions{});
  ASSERT_EQ(y[1].yields.count, 1u);
  ASSERT_LT(y[1].yields.windows[0].window_ns, kMinPartWireNs * 16);
  // Twice its bytes on the wire of a 10 Gbit/s link for 0.5 ms.
  EXPECT_EQ(y[1].yields.chunk_bytes, static_cast<uint64_t>(kMinPartWireNs * 1e-9 * 1.25e9 / 2));
}

TEST(RankedYields, NoPartSmallerThanTheShimsFloor) {
  const Pair slow(1e6);  // 8 Mbit/s: a sixteenth of the window is 2.7 kB on the wire
  const auto y = RankedYields(slow.topology, slow.jobs, slow.plan, PlannerOptions{});
  ASSERT_EQ(y[1].yields.count, 1u);
  EXPECT_EQ(y[1].yields.chunk_bytes, kMinChunkBytes);
}

}  // namespace
}  // namespace metronome::planner
