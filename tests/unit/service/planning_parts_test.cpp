// Planning in parts: the part map's rule (jobs that share a link are in one part), and the
// planning worker with the registry in-process: a round held in one part does not hold up the
// pushes of another, and a job that would span two parts joins them first.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "metronome/common/clock.hpp"
#include "metronome/common/protocol.hpp"
#include "metronome/controller/plan_snapshot.hpp"
#include "part_map.hpp"
#include "planning_worker.hpp"
#include "registry.hpp"

namespace metronome::service {
namespace {

TEST(PartMap, JobsThatShareALinkAreInOnePart) {
  PartMap map(3);
  map.Claim(1, {10, 11}, 0);
  map.Claim(2, {11, 12}, 0);
  map.Claim(3, {20}, 1);
  map.Claim(4, {30}, 2);
  EXPECT_EQ(map.PartsOf(5, {12}), (std::set<size_t>{0}));
  EXPECT_EQ(map.PartsOf(5, {12, 20, 99}), (std::set<size_t>{0, 1}));
  EXPECT_EQ(map.PartsOf(5, {99}), (std::set<size_t>{}));
  EXPECT_THROW(map.Claim(5, {12, 20}, 0), std::logic_error);  // 20 is part 1's

  // A newcomer on 12 and 20 joins parts 0 and 1: part 1's jobs reachable from 20 move.
  EXPECT_EQ(map.MoveConnected(1, 5, {12, 20}, 0), (std::vector<uint64_t>{3}));
  map.Claim(5, {12, 20}, 0);
  EXPECT_EQ(map.Jobs(0), 4u);
  EXPECT_EQ(map.Jobs(1), 0u);
  EXPECT_EQ(map.PartOf(3), 0u);
  // Through shared links, the whole connected part moves, and no job of another part.
  EXPECT_EQ(map.MoveConnected(0, 99, {10}, 1).size(), 4u);
  EXPECT_EQ(map.PartOf(4), 2u);
  EXPECT_EQ(map.Jobs(1), 4u);

  // A job's own links count even where the newcomer's do not reach them (a re-plan on other
  // nodes).
  map.Claim(6, {40}, 2);
  EXPECT_EQ(map.MoveConnected(2, 6, {41}, 1), (std::vector<uint64_t>{6}));
  // A job on no link (its ranks on one node) moves itself.
  map.Claim(8, {}, 2);
  EXPECT_EQ(map.MoveConnected(2, 8, {50}, 1), (std::vector<uint64_t>{8}));
  map.Claim(8, {50}, 1);
  EXPECT_EQ(map.PartOf(8), 1u);

  // A link is free once the last job on it is released.
  map.Release(4);
  EXPECT_EQ(map.PartsOf(7, {30}), (std::set<size_t>{}));
  map.Release(1);
  EXPECT_EQ(map.PartsOf(7, {10}), (std::set<size_t>{}));
  EXPECT_EQ(map.PartsOf(7, {11}), (std::set<size_t>{1}));  // job 2 is still on it
}

// The registry and the planning worker of a service, without its sockets: messages in through
// Registry::Handle, pushes out of Registry::TakeOutbox.
class Planning {
 public:
  explicit Planning(uint32_t parts, uint32_t threads = 2) {
    spdlog::set_level(spdlog::level::warn);
    cfg_.controller.offline_interval_ms = 0;
    cfg_.controller.planning_parts = parts;
    cfg_.controller.planning_threads = threads;
    cfg_.topology.unknown_nodes_link.clear();
    cfg_.topology.two_tier = controller::TopologyConfig::TwoTier{4, 2, 1.25e9, 1.25e9};
    worker_ = std::make_unique<PlanningWorker>(cfg_, metrics_);
    registry_ = std::make_unique<Registry>(
        cfg_, metrics_, [this](const PlanJob& j) { return worker_->JobLinks(j); },
        worker_->InitialPlan());
  }
  ~Planning() {
    registry_->Stop();
    worker_->Stop();
  }
  PlanningWorker& Worker() { return *worker_; }
  Registry& Reg() { return *registry_; }
  Metrics& Counters() { return metrics_; }
  // Rank 0s pushed so far, in the order of their first push.
  const std::vector<std::string>& PushOrder() const { return pushed_; }
  void Start() { worker_->Start(*registry_, nullptr); }

  // A two-rank job on `n0` and `n1`, registered and profiled: its first plan is queued. Its
  // ranks' connections are named job + `again` + rank (`again`: the ranks restarted).
  void Join(const std::string& job, const std::string& n0, const std::string& n1,
            const std::string& again = "") {
    for (uint32_t rank = 0; rank < 2; ++rank) {
      proto::Hello h;
      h.job_id = job;
      h.rank = rank;
      h.world_size = 2;
      h.node = rank == 0 ? n0 : n1;
      Send(job + again + std::to_string(rank), h);
    }
    proto::ProfileReport r;
    r.job_id = job;
    r.period_ns = 100'000'000;
    r.comm_ns = 30'000'000;
    r.confidence = 1.0;
    Send(job + again + "0", r);
  }

  // Waits up to `ms` for a timetable push to rank 0 of `job` (the connection job + `again` +
  // "0"; others seen meanwhile are kept).
  bool Pushed(const std::string& job, int ms, const std::string& again = "") {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    do {
      for (const Outgoing& o : registry_->TakeOutbox()) {
        const proto::Decoded d = proto::Decode(o.payload);
        const bool first = std::find(pushed_.begin(), pushed_.end(), o.identity) == pushed_.end();
        if (d.Ok() && std::holds_alternative<proto::TimetablePush>(d.message) && first) {
          pushed_.push_back(o.identity);
        }
      }
      if (std::find(pushed_.begin(), pushed_.end(), job + again + "0") != pushed_.end()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } while (std::chrono::steady_clock::now() < until);
    return false;
  }

 private:
  template <typename M>
  void Send(const std::string& identity, const M& m) {
    registry_->Handle({identity, proto::Encode(proto::Message{m})}, RealtimeNs());
  }

  ServiceConfig cfg_;
  Metrics metrics_;
  std::unique_ptr<PlanningWorker> worker_;
  std::unique_ptr<Registry> registry_;
  std::vector<std::string> pushed_;
};

// Holds the first round that starts while armed, in whichever part, until released.
class RoundGate {
 public:
  void Arm() {
    std::lock_guard lock(mu_);
    armed_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  // The hook: true once it held a round (and it was released).
  void OnRound(size_t part) {
    std::unique_lock lock(mu_);
    if (!armed_) return;
    armed_ = false;
    held_part_ = static_cast<int>(part);
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
  }
  int WaitHeld() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return held_part_ >= 0; });
    return held_part_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, released_ = false;
  int held_part_ = -1;
};

TEST(PlanningParts, ARoundHeldInOnePartDoesNotHoldUpAnother) {
  Planning p(2);
  RoundGate gate;
  p.Worker().OnRound([&](size_t part) { gate.OnRound(part); });
  p.Start();
  gate.Arm();
  p.Join("a", "r0n0", "r0n1");  // rack 0's node links
  const int held = gate.WaitHeld();
  ASSERT_GE(held, 0);
  p.Join("b", "r1n0", "r1n1");  // rack 1's: no link in common with a
  EXPECT_TRUE(p.Pushed("b", 5000)) << "b waited for a's round";
  EXPECT_FALSE(p.Pushed("a", 0));
  gate.Release();
  EXPECT_TRUE(p.Pushed("a", 5000));
  const ClusterView v = p.Reg().View({}, {});
  ASSERT_EQ(v.plan.size(), 2u);
  EXPECT_EQ(v.plan[0]->jobs.size(), 1u);
  EXPECT_EQ(v.plan[1]->jobs.size(), 1u);
}

// The same with one part: b's plan waits for a's round (what parts are for).
TEST(PlanningParts, WithOnePartEveryRoundWaitsForTheOneBefore) {
  Planning p(1);
  RoundGate gate;
  p.Worker().OnRound([&](size_t part) { gate.OnRound(part); });
  p.Start();
  gate.Arm();
  p.Join("a", "r0n0", "r0n1");
  ASSERT_EQ(gate.WaitHeld(), 0);
  p.Join("b", "r1n0", "r1n1");
  EXPECT_FALSE(p.Pushed("b", 300));
  gate.Release();
  EXPECT_TRUE(p.Pushed("a", 5000));
  EXPECT_TRUE(p.Pushed("b", 5000));
}

// A job on a link of each part joins them: the jobs connected to it move into one planner, so
// that its window and theirs take turns; the other part is left with nothing.
TEST(PlanningParts, AJobAcrossTwoPartsJoinsThem) {
  Planning p(2);
  p.Start();
  p.Join("a", "r0n0", "r0n1");
  ASSERT_TRUE(p.Pushed("a", 5000));
  p.Join("b", "r1n0", "r1n1");
  ASSERT_TRUE(p.Pushed("b", 5000));
  {
    const ClusterView v = p.Reg().View({}, {});
    ASSERT_EQ(v.plan.size(), 2u);
    ASSERT_EQ(v.plan[0]->jobs.size(), 1u);  // a and b were planned apart
    ASSERT_EQ(v.plan[1]->jobs.size(), 1u);
  }
  p.Join("c", "r0n0", "r1n0");  // shares a's node link and b's
  ASSERT_TRUE(p.Pushed("c", 5000));
  const ClusterView v = p.Reg().View({}, {});
  ASSERT_EQ(v.plan.size(), 2u);
  const size_t together = v.plan[0]->jobs.size() == 3 ? 0 : 1;
  EXPECT_EQ(v.plan[together]->jobs.size(), 3u);
  EXPECT_TRUE(v.plan[1 - together]->jobs.empty());
  // One planner placed all three: c's window and a's take turns on r0n0's link.
  const planner::Plan& plan = *v.plan[together]->plan;
  const planner::JobPlan* a = nullptr;
  const planner::JobPlan* c = nullptr;
  for (const auto& e : plan.jobs) {
    if (e.id == v.jobs[0].id) a = &e;
    if (e.id == v.jobs[2].id) c = &e;
  }
  ASSERT_TRUE(a != nullptr && c != nullptr);
  EXPECT_FALSE(a->best_effort);
  EXPECT_FALSE(c->best_effort);
  const Timetable& ta = v.jobs[0].timetable;
  const Timetable& tc = v.jobs[2].timetable;
  ASSERT_EQ(ta.period_ns, tc.period_ns);
  ASSERT_LT(ta.window_ns, ta.period_ns);  // gated now
  const int64_t apart = (tc.offset_ns - ta.offset_ns + ta.period_ns) % ta.period_ns;
  EXPECT_GE(apart, ta.window_ns);
  EXPECT_LE(apart + tc.window_ns, ta.period_ns);
}

// A job planned on no link (its ranks on one node) whose ranks come back on the links of two
// other parts: the links reach no job of its own part, the job itself moves too.
TEST(PlanningParts, AJobOnNoLinkThatComesBackAcrossTwoPartsJoinsThem) {
  Planning p(3);
  p.Start();
  p.Join("a", "r0n0", "r0n1");
  ASSERT_TRUE(p.Pushed("a", 5000));
  p.Join("b", "r1n0", "r1n1");
  ASSERT_TRUE(p.Pushed("b", 5000));
  p.Join("d", "r2n0", "r2n0");  // one node: on no link
  ASSERT_TRUE(p.Pushed("d", 5000));
  {
    const ClusterView v = p.Reg().View({}, {});
    for (const auto& part : v.plan) ASSERT_EQ(part->jobs.size(), 1u);  // one job a part
  }
  p.Join("d", "r0n0", "r1n0", "-again");  // on a's node link and b's
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  size_t together = 0;
  while (together < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (const auto& part : p.Reg().View({}, {}).plan) {
      together = std::max(together, part->jobs.size());
    }
  }
  EXPECT_EQ(together, 3u) << "one planner for the three";
}

// A round that has planned for its share of time pushes what it planned and leaves the rest of
// its batch for the next round: a join beside a burst (in the same part) is pushed first.
TEST(PlanningParts, ALongRoundPushesWhatItPlannedFirstAndLeavesTheRest) {
  Planning p(1);
  RoundGate gate;
  std::atomic<int> rounds{0};
  p.Worker().OnRound([&](size_t part) {
    gate.OnRound(part);
    // The second round (the burst and the lone join) runs past its share.
    if (rounds++ == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  });
  p.Start();
  gate.Arm();
  p.Join("x", "r2n0", "r2n1");
  ASSERT_GE(gate.WaitHeld(), 0);
  std::vector<std::string> burst;
  for (int i = 0; i < 6; ++i) {  // across racks 0 and 1: one group, in one part with x
    burst.push_back("b" + std::to_string(i));
    p.Join(burst.back(), "r0n" + std::to_string(i % 2), "r1n" + std::to_string(i % 2));
  }
  p.Join("lone", "r3n0", "r3n1");  // arrives last, shares no link with the burst
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // all sorted into the backlog
  gate.Release();
  ASSERT_TRUE(p.Pushed("lone", 5000));
  for (const auto& b : burst) ASSERT_TRUE(p.Pushed(b, 5000)) << b;
  EXPECT_GE(p.Counters().RoundsYielded().Value(), 1.0);
  const auto& order = p.PushOrder();
  const auto at = [&](const std::string& job) {
    return std::find(order.begin(), order.end(), job + "0") - order.begin();
  };
  for (const auto& b : burst) EXPECT_LT(at("lone"), at(b)) << b;
}

}  // namespace
}  // namespace metronome::service
