// ScheduleChanges: what a planning round hands the registry. Only schedules that differ from the
// last round's; a job new to it counts as changed, a job that left is forgotten (and counts as
// changed if it comes back), and yields compare by content, not by pointer.
#include "schedule_changes.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace metronome::service {
namespace {

using controller::JobSchedule;

JobSchedule Schedule(uint64_t id, int64_t offset_ns) {
  JobSchedule s;
  s.id = id;
  s.timetable.period_ns = 100'000'000;
  s.timetable.offset_ns = offset_ns;
  s.timetable.window_ns = 20'000'000;
  s.predicted_slowdown = 1.0;
  return s;
}

std::vector<uint64_t> Ids(const std::vector<JobSchedule>& jobs) {
  std::vector<uint64_t> ids;
  ids.reserve(jobs.size());
  for (const auto& j : jobs) ids.push_back(j.id);
  return ids;
}

std::vector<uint64_t> Round(ScheduleChanges& changes, std::vector<JobSchedule> jobs) {
  changes.KeepChanged(jobs);
  return Ids(jobs);
}

TEST(ScheduleChanges, KeepsOnlyWhatDiffersFromTheLastRound) {
  ScheduleChanges c;
  EXPECT_EQ(Round(c, {Schedule(1, 0), Schedule(2, 30'000'000), Schedule(3, 60'000'000)}),
            (std::vector<uint64_t>{1, 2, 3}));  // all new
  EXPECT_EQ(c.Jobs(), 3u);
  EXPECT_TRUE(Round(c, {Schedule(1, 0), Schedule(2, 30'000'000), Schedule(3, 60'000'000)}).empty());
  // Job 2 moves, and the order of the list does not matter.
  EXPECT_EQ(Round(c, {Schedule(3, 60'000'000), Schedule(2, 40'000'000), Schedule(1, 0)}),
            (std::vector<uint64_t>{2}));
  // Back where it was two rounds ago: a change against the last round.
  EXPECT_EQ(Round(c, {Schedule(1, 0), Schedule(2, 30'000'000), Schedule(3, 60'000'000)}),
            (std::vector<uint64_t>{2}));
}

TEST(ScheduleChanges, EveryFieldTheRegistryAdoptsCounts) {
  ScheduleChanges c;
  Round(c, {Schedule(1, 0)});
  JobSchedule s = Schedule(1, 0);
  s.best_effort = true;
  EXPECT_EQ(Round(c, {s}).size(), 1u);
  s.yielded_to = true;
  EXPECT_EQ(Round(c, {s}).size(), 1u);
  s.predicted_slowdown = 1.2;  // shown by the status API
  EXPECT_EQ(Round(c, {s}).size(), 1u);
  s.timetable.window_ns += 1;
  EXPECT_EQ(Round(c, {s}).size(), 1u);
  EXPECT_TRUE(Round(c, {s}).empty());
}

TEST(ScheduleChanges, YieldsCompareByContent) {
  ScheduleChanges c;
  JobSchedule s = Schedule(1, 0);
  YieldSet y;
  y.count = 1;
  y.windows[0] = {.period_ns = 100'000'000, .offset_ns = 50'000'000, .window_ns = 20'000'000};
  s.yields = std::make_shared<const YieldSet>(y);
  Round(c, {s});
  s.yields = std::make_shared<const YieldSet>(y);  // a fresh set, the same windows
  EXPECT_TRUE(Round(c, {s}).empty());
  y.windows[0].offset_ns += 1;
  s.yields = std::make_shared<const YieldSet>(y);
  EXPECT_EQ(Round(c, {s}).size(), 1u);
  s.yields = nullptr;  // no longer yields
  EXPECT_EQ(Round(c, {s}).size(), 1u);
  EXPECT_TRUE(Round(c, {s}).empty());
}

TEST(ScheduleChanges, AJobThatLeftIsForgotten) {
  ScheduleChanges c;
  Round(c, {Schedule(1, 0), Schedule(2, 30'000'000)});
  EXPECT_TRUE(Round(c, {Schedule(1, 0)}).empty());
  EXPECT_EQ(c.Jobs(), 1u);
  // Listed again with the schedule it had: new to it again, so the registry adopts it.
  EXPECT_EQ(Round(c, {Schedule(1, 0), Schedule(2, 30'000'000)}), (std::vector<uint64_t>{2}));
  EXPECT_TRUE(Round(c, {}).empty());
  EXPECT_EQ(c.Jobs(), 0u);
}

}  // namespace
}  // namespace metronome::service
