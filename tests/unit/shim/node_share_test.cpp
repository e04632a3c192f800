// NodeShare: one rank of a job on a node leads, the others follow what it publishes, and one of
// them leads when it has gone. Two NodeShare objects in one process hold two open file
// descriptions, whose locks conflict as two processes' would.
#include "node_share.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include "metronome/common/clock.hpp"

namespace metronome::shim {
namespace {

constexpr int64_t kStale = 5000 * kMs;
constexpr int64_t kT0 = 1'000'000 * kMs;

class NodeShareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/metronome-share-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<NodeShare> Open(const std::string& job = "job-a", int64_t now = kT0) {
    std::string error;
    auto s = NodeShare::Open(dir_, "node-1", job, now, &error);
    EXPECT_NE(s, nullptr) << error;
    return s;
  }

  std::string dir_;
};

Timetable SomeTimetable(uint64_t version) {
  return Timetable{version, kT0, 200 * kMs, 30 * kMs, 80 * kMs, 10 * kMs, 100 * kMs};
}

YieldSet SomeYields() {
  YieldSet y;
  y.epoch_ns = kT0;
  y.need_ns = 20 * kMs;
  y.max_wait_ns = 50 * kMs;
  y.count = 1;
  y.windows[0] = YieldWindow{300 * kMs, 0, 90 * kMs, 1.0 / static_cast<double>(300 * kMs)};
  return y;
}

TEST_F(NodeShareTest, TheFirstLeadsTheOthersFollowWhatItPublishes) {
  auto leader = Open();
  auto follower = Open();
  ASSERT_TRUE(leader && follower);
  EXPECT_TRUE(leader->Leads());
  EXPECT_FALSE(follower->Leads());
  EXPECT_EQ(leader->Path(), follower->Path());
  EXPECT_FALSE(follower->TryLead(kT0, kStale)) << "two leaders at once";

  Timetable t;
  YieldSet y;
  uint64_t first = 0;
  EXPECT_FALSE(follower->ReadTimetable(t, y, first)) << "a timetable before any was published";
  int64_t offset = 0;
  int64_t error = 0;
  EXPECT_FALSE(follower->ReadClock(offset, error));

  leader->PublishTimetable(SomeTimetable(3), SomeYields());
  leader->PublishClock(-1234, 56);
  leader->Heartbeat(kT0 + 10 * kMs);
  uint64_t second = 0;
  ASSERT_TRUE(follower->ReadTimetable(t, y, second));
  EXPECT_NE(first, second);
  EXPECT_EQ(t, SomeTimetable(3));
  EXPECT_EQ(y, SomeYields());
  ASSERT_TRUE(follower->ReadClock(offset, error));
  EXPECT_EQ(offset, -1234);
  EXPECT_EQ(error, 56);
  EXPECT_EQ(follower->LeaderHeartbeatNs(), kT0 + 10 * kMs);
  EXPECT_EQ(follower->LeaderPid(), static_cast<uint32_t>(getpid()));

  uint64_t again = 0;
  ASSERT_TRUE(follower->ReadTimetable(t, y, again));
  EXPECT_EQ(again, second) << "the publication changes only with a publication";
  leader->ClearTimetable();
  EXPECT_FALSE(follower->ReadTimetable(t, y, again));
  EXPECT_NE(again, second);
}

TEST_F(NodeShareTest, AFollowerLeadsWhenTheLeaderHasGoneAndKeepsItsTimetable) {
  auto leader = Open();
  auto follower = Open();
  leader->PublishTimetable(SomeTimetable(7), SomeYields());
  leader->Heartbeat(kT0 + 100 * kMs);
  leader.reset();  // the process exits: the kernel drops its lock
  ASSERT_TRUE(follower->TryLead(kT0 + 300 * kMs, kStale));
  EXPECT_TRUE(follower->Leads());
  Timetable t;
  YieldSet y;
  uint64_t pub = 0;
  ASSERT_TRUE(follower->ReadTimetable(t, y, pub)) << "a fresh leader's timetable was dropped";
  EXPECT_EQ(t.version, 7u);
  auto third = Open();
  EXPECT_FALSE(third->Leads());
  EXPECT_EQ(third->LeaderHeartbeatNs(), kT0 + 300 * kMs);
}

// What a segment holds when a rank leads from the start is an earlier process's (a job run
// again under its name, perhaps against another scheduler), however recent: dropped.
TEST_F(NodeShareTest, ARankThatLeadsFromTheStartStartsAfresh) {
  {
    auto old = Open();
    old->PublishTimetable(SomeTimetable(9), SomeYields());
    old->PublishClock(5, 1);
    old->Heartbeat(kT0);
  }
  auto fresh = Open("job-a", kT0 + 1);
  ASSERT_TRUE(fresh->Leads());
  Timetable t;
  YieldSet y;
  uint64_t pub = 0;
  EXPECT_FALSE(fresh->ReadTimetable(t, y, pub)) << "an earlier process's timetable survived";
  int64_t offset = 0;
  int64_t error = 0;
  EXPECT_FALSE(fresh->ReadClock(offset, error));
}

// A follower that takes over from a leader silent longer than the fail-open bound (its
// followers failed open long ago) carries nothing on.
TEST_F(NodeShareTest, AFollowerTakingOverFromALongSilentLeaderStartsAfresh) {
  auto leader = Open();
  auto follower = Open();
  leader->PublishTimetable(SomeTimetable(4), SomeYields());
  leader->Heartbeat(kT0);
  leader.reset();
  ASSERT_TRUE(follower->TryLead(kT0 + kStale + 1, kStale));
  Timetable t;
  YieldSet y;
  uint64_t pub = 0;
  EXPECT_FALSE(follower->ReadTimetable(t, y, pub));
}

TEST_F(NodeShareTest, TheLeaderReportsItsFollowersCountersThoseThatExitedIncluded) {
  auto leader = Open();
  auto a = Open();
  auto b = Open();
  ShareCounters ca;
  ca.gated = 10;
  ca.yielded = 3;
  ca.yield_wait_ns = 7 * kMs;
  ShareCounters cb;
  cb.gated = 5;
  cb.late = 2;
  a->PublishCounters(ca, kT0);
  b->PublishCounters(cb, kT0);
  ShareCounters sum = leader->FollowerCounters(kT0, kStale);
  EXPECT_EQ(sum.gated, 15u);
  EXPECT_EQ(sum.late, 2u);
  EXPECT_EQ(sum.yielded, 3u);
  EXPECT_EQ(sum.yield_wait_ns, 7 * kMs);

  // b falls silent (a process killed without a word): its slot is taken back, its counts kept.
  ca.gated = 12;
  a->PublishCounters(ca, kT0 + kStale);
  sum = leader->FollowerCounters(kT0 + kStale + 1, kStale);
  EXPECT_EQ(sum.gated, 17u);
  sum = leader->FollowerCounters(kT0 + kStale + 2, kStale);
  EXPECT_EQ(sum.gated, 17u) << "a retired follower counted twice";
  // b comes back after the stall: it claims a slot again and counts from there.
  cb.gated = 6;
  b->PublishCounters(cb, kT0 + kStale + 3);
  sum = leader->FollowerCounters(kT0 + kStale + 3, kStale);
  EXPECT_EQ(sum.gated, 23u);
}

TEST_F(NodeShareTest, JobsAndNodesHaveSegmentsOfTheirOwn) {
  auto a = Open("job-a");
  auto b = Open("job-b");
  EXPECT_TRUE(a->Leads());
  EXPECT_TRUE(b->Leads());
  EXPECT_NE(a->Path(), b->Path());
  EXPECT_NE(ShareFileName(1, "ab", "c"), ShareFileName(1, "a", "bc"));
  EXPECT_NE(ShareFileName(1, "n", "j"), ShareFileName(2, "n", "j"));
  EXPECT_EQ(ShareFileName(1, "n", "j"), ShareFileName(1, "n", "j"));
}

TEST_F(NodeShareTest, AFileItCannotTrustIsNotShared) {
  const std::string path =
      dir_ + "/" + ShareFileName(static_cast<uint32_t>(geteuid()), "node-1", "job-a");
  std::string error;
  {
    std::ofstream(path) << "not a segment";
    chmod(path.c_str(), 0600);
    EXPECT_EQ(NodeShare::Open(dir_, "node-1", "job-a", kT0, &error), nullptr);
    EXPECT_NE(error.find("another layout"), std::string::npos) << error;
  }
  std::filesystem::remove(path);
  {
    auto s = Open();  // a segment of the right size...
    s.reset();
  }
  chmod(path.c_str(), 0644);  // ...that others may write
  error.clear();
  EXPECT_EQ(NodeShare::Open(dir_, "node-1", "job-a", kT0, &error), nullptr);
  EXPECT_NE(error.find("not a private file"), std::string::npos) << error;
  std::filesystem::remove(path);
  std::filesystem::create_symlink("/dev/null", path);
  error.clear();
  EXPECT_EQ(NodeShare::Open(dir_, "node-1", "job-a", kT0, &error), nullptr);
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
  error.clear();
  EXPECT_EQ(NodeShare::Open(dir_ + "/missing", "node-1", "job-a", kT0, &error), nullptr);
  EXPECT_FALSE(error.empty());
}

TEST_F(NodeShareTest, AForkedChildDoesNotTakeTheLockWithIt) {
  auto leader = Open();
  const pid_t pid = fork();
  if (pid == 0) {
    leader->AbandonAfterFork();
    std::string error;
    auto mine = NodeShare::Open(dir_, "node-1", "job-a", kT0, &error);
    _exit(mine != nullptr && !mine->Leads() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child led beside its parent";
  EXPECT_TRUE(leader->Leads());
  auto other = Open();
  EXPECT_FALSE(other->Leads()) << "the child's exit released the parent's lock";
}

}  // namespace
}  // namespace metronome::shim
