// Offline recalculation.
#include <gtest/gtest.h>

#include "metronome/planner/offline.h"
#include "metronome/planner/planner.h"
#include "test_util.h"

namespace metronome::planner {
namespace {

using testing::job;

TEST(Offline, ReturnsNothingWhenTheCurrentPlanCannotBeBeaten) {
  const Problem p{testing::links(1), {job(1, 0, 100, 40, {0})}};
  const Plan current = plan(p);
  OfflineOptions o;
  o.max_iterations = 50;
  EXPECT_FALSE(recalculate(p, current, o).has_value());
}

TEST(Offline, StopsAtOnceWhenCancelled) {
  const Problem p{testing::links(1), {job(1, 0, 100, 40, {0}), job(2, 0, 100, 40, {0})}};
  std::stop_source stop;
  stop.request_stop();
  OfflineOptions o;
  o.budget = std::chrono::seconds(60);
  OfflineStats stats;
  EXPECT_FALSE(recalculate(p, plan(p), o, stop.get_token(), &stats).has_value());
  EXPECT_EQ(stats.iterations, 0u);
}

}  // namespace
}  // namespace metronome::planner
