// What a job that is not planned yet yields to (observer_yields.hpp).
#include "metronome/controller/observer_yields.hpp"

#include <gtest/gtest.h>

#include "metronome/common/clock.hpp"
#include "metronome/controller/rules.hpp"

namespace metronome::controller {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000 * kMs;

JobState Planned(uint64_t id, int32_t priority, std::vector<std::string> links, int64_t period,
                 int64_t offset, int64_t window, int64_t epoch = kEpoch) {
  JobState j;
  j.id = id;
  j.priority = priority;
  j.links = std::move(links);
  j.planned = true;
  j.timetable = {1, epoch, period, offset, window, 5 * kMs, period - window};
  return j;
}

TEST(ObserverYields, TheGatedWindowsOfHigherPriorityOnItsLinksHighestRankedFirst) {
  const JobState high = Planned(1, 3, {"up", "down"}, 300 * kMs, 10 * kMs, 90 * kMs);
  // Normal priority, two epochs apart: its offset is taken into the set's epoch.
  const JobState normal =
      Planned(2, 1, {"up"}, 200 * kMs, 30 * kMs, 40 * kMs, kEpoch + 1'000 * kMs + 70 * kMs);
  const JobState equal = Planned(3, 0, {"up"}, 250 * kMs, 0, 50 * kMs);         // not above it
  const JobState elsewhere = Planned(4, 3, {"other"}, 250 * kMs, 0, 50 * kMs);  // other link
  JobState ungated = Planned(5, 3, {"up"}, 250 * kMs, 0, 250 * kMs);            // always open
  JobState best_effort = Planned(6, 3, {"up"}, 250 * kMs, 0, 50 * kMs);
  best_effort.best_effort = true;
  JobState unplanned_state = Planned(7, 3, {"up"}, 250 * kMs, 0, 50 * kMs);
  unplanned_state.planned = false;
  const JobState& unplanned = unplanned_state;
  const JobState& ungated_job = ungated;
  const JobState& best_effort_job = best_effort;
  GatedJobsByLink gated;
  for (const JobState* j :
       {&normal, &high, &equal, &elsewhere, &ungated_job, &best_effort_job, &unplanned}) {
    gated.Add(*j);
  }
  const YieldSet y = gated.YieldsFor(0, {"up", "down"});
  ASSERT_EQ(y.count, 2u);
  EXPECT_EQ(y.epoch_ns, high.timetable.epoch_ns);
  EXPECT_EQ(y.windows[0].period_ns, 300 * kMs);
  EXPECT_EQ(y.windows[0].offset_ns, 10 * kMs);
  EXPECT_EQ(y.windows[0].window_ns, 90 * kMs);
  EXPECT_EQ(y.windows[1].period_ns, 200 * kMs);
  EXPECT_EQ(y.windows[1].offset_ns, 100 * kMs);  // (1,070 + 30) mod 200
  EXPECT_EQ(y.windows[1].window_ns, 40 * kMs);
  EXPECT_EQ(y.need_ns, 0);
  EXPECT_EQ(y.tolerance_ns, 0);
  EXPECT_EQ(y.max_wait_ns, 300 * kMs);
  EXPECT_GT(y.windows[1].inv_period, 0.0);  // validated
  // The high job yields to nobody; a job on no shared link neither.
  EXPECT_EQ(gated.YieldsFor(3, {"up"}).count, 0u);
  EXPECT_EQ(gated.YieldsFor(0, {"elsewhere"}).count, 0u);
}

const TimetableConfig kConfig{};

TEST(ObserverYields, AnUnplannedJobIsPushedAnOpenTimetableWithItsSetUntilPlanned) {
  JobState job;
  job.links = {"up"};
  const JobState high = Planned(1, 3, {"up"}, 300 * kMs, 10 * kMs, 90 * kMs);
  GatedJobsByLink gated;
  gated.Add(high);
  const YieldSet y = gated.YieldsFor(job.priority, job.links);
  ASSERT_TRUE(AdoptObserverYields(job, y, kConfig));
  EXPECT_FALSE(job.planned);
  EXPECT_EQ(job.timetable.version, 1u);
  EXPECT_TRUE(AlwaysOpen(job.timetable));
  EXPECT_EQ(ValidateTimetable(job.timetable) & kTimetableRejectMask, 0u);
  EXPECT_EQ(job.yields, y);  // its wait (300 ms) under the configured cap
  EXPECT_FALSE(AdoptObserverYields(job, y, kConfig)) << "nothing changed: nothing to push";
  // The window left: an empty set is pushed, so that its shims stop yielding.
  ASSERT_TRUE(AdoptObserverYields(job, YieldSet{}, kConfig));
  EXPECT_EQ(job.timetable.version, 2u);
  EXPECT_EQ(job.yields.count, 0u);
  EXPECT_TRUE(AlwaysOpen(job.timetable));
  EXPECT_FALSE(AdoptObserverYields(job, YieldSet{}, kConfig));
  // Once planned, the plan's schedule is its own; the observer's set no longer applies.
  ASSERT_TRUE(AdoptObserverYields(job, y, kConfig));
  JobSchedule s;
  s.id = job.id;
  s.timetable = high.timetable;
  s.timetable.offset_ns = 150 * kMs;
  uint32_t check = 0;
  ASSERT_TRUE(AdoptSchedule(job, s, TimetableConfig{}, check));
  EXPECT_TRUE(job.planned);
  EXPECT_EQ(job.timetable.version, 4u);
  EXPECT_EQ(job.yields.count, 0u);
  EXPECT_FALSE(AdoptObserverYields(job, y, kConfig));
  EXPECT_EQ(job.timetable.version, 4u);
}

TEST(ObserverYields, TheWaitIsCappedByTheConfiguredMaxWait) {
  JobState job;
  const JobState high = Planned(1, 3, {"up"}, 3'000 * kMs, 10 * kMs, 900 * kMs);
  GatedJobsByLink gated;
  gated.Add(high);
  TimetableConfig config;
  config.max_wait_ms = 500;
  ASSERT_TRUE(AdoptObserverYields(job, gated.YieldsFor(0, {"up"}), config));
  EXPECT_EQ(job.yields.max_wait_ns, 500 * kMs);
}

}  // namespace
}  // namespace metronome::controller
