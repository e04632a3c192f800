// Host gate decisions and waits, the timetable store, the event ring, the GPU timer calibration,
// and the gate kernels' turns on a simulated GPU timer.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "device_gate.hpp"
#include "gate_kernel_body.hpp"
#include "gpu_timer.hpp"
#include "host_gate.hpp"
#include "metronome/common/clock.hpp"
#include "spsc_ring.hpp"
#include "timetable_store.hpp"

namespace metronome::shim {
namespace {

Timetable Tt(int64_t epoch, int64_t period, int64_t window, int64_t slack, int64_t max_wait) {
  Timetable t{1, epoch, period, 0, window, slack, max_wait};
  EXPECT_EQ(ValidateTimetable(t) & kTimetableRejectMask, 0u);
  return t;
}

TEST(HostGate, GoesInsideTheSlack) {
  const Timetable t = Tt(0, 100 * kMs, 10 * kMs, 5 * kMs, 50 * kMs);
  const GateDecision d = DecideHostGate(t, 1000 * kMs + 3 * kMs, 0, 1000 * kMs);
  EXPECT_EQ(d.action, GateAction::kGoNow);
}

TEST(HostGate, WaitsForTheNextWindowInLocalTime) {
  const Timetable t = Tt(0, 100 * kMs, 10 * kMs, 5 * kMs, 80 * kMs);
  // Local clock 7 ms behind the scheduler: local 1030 is scheduler 1037; next window at 1100
  // scheduler = 1093 local.
  const GateDecision d = DecideHostGate(t, 1030 * kMs, 7 * kMs, 1000 * kMs);
  EXPECT_EQ(d.action, GateAction::kWaitUntil);
  EXPECT_EQ(d.until_ns, 1093 * kMs);
}

// A higher-priority window [0, 80) ms of every 280 ms, from an epoch at 1 s.
YieldSet HigherWindow(int64_t need, int64_t max_wait) {
  YieldSet y;
  y.epoch_ns = 1000 * kMs;
  y.need_ns = need;
  y.max_wait_ns = max_wait;
  y.count = 1;
  y.windows[0] = {280 * kMs, 0, 80 * kMs};
  EXPECT_EQ(ValidateYieldSet(y) & kYieldRejectMask, 0u);
  return y;
}

TEST(HostGate, APhaseYieldsToAHigherWindowInLocalTime) {
  const Timetable open = Tt(1000 * kMs, 300 * kMs, 300 * kMs, 0, 0);  // no gate of its own
  const YieldSet y = HigherWindow(50 * kMs, 300 * kMs);
  // Local 1020 = scheduler 1027: inside the window, which closes at 1080 scheduler = 1073 local.
  const GateDecision d = DecideHostGate(open, YieldRequest{&y, 50 * kMs, true}, 1020 * kMs, 7 * kMs,
                                        1000 * kMs, false);
  EXPECT_EQ(d.action, GateAction::kWaitUntil);
  EXPECT_TRUE(d.yielded);
  EXPECT_EQ(d.until_ns, 1073 * kMs);
  // The same with no yields: the always-open timetable lets it go.
  EXPECT_EQ(DecideHostGate(open, YieldRequest{}, 1020 * kMs, 7 * kMs, 1000 * kMs, false).action,
            GateAction::kGoNow);
}

TEST(HostGate, ACollectiveInsideAPhaseYieldsForItsOwnShare) {
  const Timetable open = Tt(1000 * kMs, 300 * kMs, 300 * kMs, 0, 0);
  const YieldSet y = HigherWindow(120 * kMs, 300 * kMs);
  // At 1250 (30 ms before the window at 1280) a collective needing 20 ms goes; one needing
  // 40 ms waits for the window to pass (1360).
  const GateDecision small =
      DecideHostGate(open, YieldRequest{&y, 20 * kMs, false}, 1250 * kMs, 0, 1000 * kMs, false);
  EXPECT_EQ(small.action, GateAction::kGoNow);
  const GateDecision big =
      DecideHostGate(open, YieldRequest{&y, 40 * kMs, false}, 1250 * kMs, 0, 1000 * kMs, false);
  EXPECT_EQ(big.action, GateAction::kWaitUntil);
  EXPECT_EQ(big.until_ns, 1360 * kMs);
  // Never beyond the local cap on any wait (METRONOME_MAX_WAIT_MS).
  EXPECT_EQ(DecideHostGate(open, YieldRequest{&y, 40 * kMs, false}, 1250 * kMs, 0, 50 * kMs, false)
                .action,
            GateAction::kGoNow);
}

// The rest of the phase from a collective on (common's PhaseRest) decides with the set's
// allowance: a phase that ends a little into the window finishes, one that would end further in
// pauses for it.
TEST(HostGate, APhaseThatEndsWithinTheAllowanceFinishesIntoTheWindow) {
  const Timetable open = Tt(1000 * kMs, 300 * kMs, 300 * kMs, 0, 0);
  YieldSet y = HigherWindow(120 * kMs, 300 * kMs);
  y.allowance_ns = 10 * kMs;
  // At 1275 (5 ms before the window at 1280) a part needing 8 ms with 14 ms of the phase left:
  // it ends 9 ms into the window, and goes.
  const GateDecision ends = DecideHostGate(
      open, YieldRequest{&y, 8 * kMs, false, nullptr, 14 * kMs}, 1275 * kMs, 0, 1000 * kMs, false);
  EXPECT_EQ(ends.action, GateAction::kGoNow);
  // 20 ms left: it would end 15 ms in, and waits for the window to pass.
  const GateDecision waits = DecideHostGate(
      open, YieldRequest{&y, 8 * kMs, false, nullptr, 20 * kMs}, 1275 * kMs, 0, 1000 * kMs, false);
  EXPECT_EQ(waits.action, GateAction::kWaitUntil);
  EXPECT_EQ(waits.until_ns, 1360 * kMs);
}

TEST(TimetableStore, PublishesTheYieldsWithTheTimetable) {
  TimetableStore store;
  const Timetable t = Tt(1000 * kMs, 300 * kMs, 300 * kMs, 0, 0);
  YieldSet y = HigherWindow(50 * kMs, 300 * kMs);
  y.allowance_ns = 7 * kMs;
  store.Publish(t, y);
  Timetable got;
  YieldSet yields;
  ASSERT_TRUE(store.Read(got, yields));
  EXPECT_EQ(got, t);
  EXPECT_EQ(yields, y);
  EXPECT_EQ(yields.windows[0].inv_period, y.windows[0].inv_period);
  EXPECT_TRUE(store.MayYield());
  store.Publish(t);  // a timetable without yields clears them
  ASSERT_TRUE(store.Read(got, yields));
  EXPECT_EQ(yields.count, 0u);
  EXPECT_FALSE(store.MayYield());
}

// A new scheduler numbers its timetables from 1 again: the host gate's cursor follows the
// store's publication, so the same version with other windows is not decided from the old ones.
TEST(TimetableStore, EveryPublicationIsNewToTheGatesCursor) {
  TimetableStore store;
  const Timetable t = Tt(1000 * kMs, 300 * kMs, 300 * kMs, 0, 0);
  YieldSet moved = HigherWindow(10 * kMs, 300 * kMs);  // the window [1000, 1080)
  moved.windows[0].offset_ns = 30 * kMs;               // ... now [1030, 1110)
  store.Publish(t, HigherWindow(10 * kMs, 300 * kMs));
  Timetable got;
  YieldSet yields;
  uint64_t first = 0, second = 0;
  ASSERT_TRUE(store.Read(got, yields, &first));
  YieldCursor cursor;
  FollowSet(cursor, first);
  // Local = scheduler time here: at 1020 the window holds the phase to 1080.
  EXPECT_EQ(DecideHostGate(t, YieldRequest{&yields, 10 * kMs, true, &cursor}, 1020 * kMs, 0,
                           1000 * kMs, false)
                .until_ns,
            1080 * kMs);
  store.Publish(t, moved);  // the same version, the window moved
  ASSERT_TRUE(store.Read(got, yields, &second));
  EXPECT_NE(second, first);
  FollowSet(cursor, second);
  // [1020, 1030) is clear now: the phase goes, as it does without a cursor.
  EXPECT_EQ(DecideHostGate(t, YieldRequest{&yields, 10 * kMs, true, &cursor}, 1020 * kMs, 0,
                           1000 * kMs, false)
                .action,
            GateAction::kGoNow);
}

TEST(HostGate, FailsOpenBeyondMaxWaitAndTheLocalCap) {
  const Timetable t = Tt(0, 100 * kMs, 10 * kMs, 5 * kMs, 80 * kMs);
  EXPECT_EQ(DecideHostGate(t, 1010 * kMs, 0, 1000 * kMs).action, GateAction::kFailOpen);  // 90 > 80
  EXPECT_EQ(DecideHostGate(t, 1050 * kMs, 0, 20 * kMs).action, GateAction::kFailOpen);    // 50 > 20
  EXPECT_EQ(DecideHostGate(t, 1090 * kMs, 0, 20 * kMs).action, GateAction::kWaitUntil);   // 10 < 20
}

// Realigning waits past the timetable's max wait, never past the local cap (then it fails open).
TEST(HostGate, RealignsPastMaxWaitButNotPastTheLocalCap) {
  const Timetable t = Tt(0, 100 * kMs, 10 * kMs, 5 * kMs, 80 * kMs);
  const GateDecision d = DecideHostGate(t, 1010 * kMs, 0, 1000 * kMs, true);  // 90 > 80
  EXPECT_EQ(d.action, GateAction::kWaitUntil);
  EXPECT_EQ(d.until_ns, 1100 * kMs);
  EXPECT_TRUE(d.realigned);
  const GateDecision capped = DecideHostGate(t, 1010 * kMs, 0, 60 * kMs, true);  // 90 > 60
  EXPECT_EQ(capped.action, GateAction::kFailOpen);
  EXPECT_FALSE(capped.realigned);
  const GateDecision early = DecideHostGate(t, 1090 * kMs, 0, 1000 * kMs, true);
  EXPECT_EQ(early.action, GateAction::kWaitUntil);  // an ordinary wait, not a realignment
  EXPECT_FALSE(early.realigned);
}

TEST(HostGate, WaitReleasesAtTheWindow) {
  const int64_t now = RealtimeNs();
  // A window opens 3 ms from now.
  const Timetable t = Tt(now + 3 * kMs, 100 * kMs, 10 * kMs, 0, 100 * kMs);
  const HostGateOutcome o = HostGate(t, RealtimeNs(), 0, 100 * kMs, true);
  const int64_t released = RealtimeNs();
  ASSERT_EQ(o.action, GateAction::kWaitUntil);
  EXPECT_GE(released, now + 3 * kMs);
  EXPECT_LT(released, now + 3 * kMs + 20 * kMs);  // generous: shared CI cores
}

TEST(HostGate, NeverBlocksWhenNotAllowed) {
  const int64_t now = RealtimeNs();
  const Timetable t = Tt(now + 30 * kMs, 100 * kMs, 10 * kMs, 0, 100 * kMs);
  const HostGateOutcome o = HostGate(t, RealtimeNs(), 0, 100 * kMs, false);
  EXPECT_EQ(o.action, GateAction::kWaitUntil);
  EXPECT_EQ(o.waited_ns, 0);
  EXPECT_LT(RealtimeNs() - now, 10 * kMs);
}

TEST(HostGate, SleepUntilPastTargetReturnsAtOnce) {
  const int64_t now = RealtimeNs();
  EXPECT_GE(SleepUntilRealtime(now - 5 * kMs), now);
  EXPECT_LT(RealtimeNs() - now, 5 * kMs);
}

TEST(TimetableStore, PublishReadClear) {
  TimetableStore s;
  Timetable t;
  EXPECT_FALSE(s.Read(t));
  EXPECT_EQ(s.Version(), 0u);
  s.Publish(Tt(5, 100 * kMs, 10 * kMs, 0, 0));
  ASSERT_TRUE(s.Read(t));
  EXPECT_EQ(t.period_ns, 100 * kMs);
  EXPECT_EQ(s.Version(), 1u);
  s.Clear();
  EXPECT_FALSE(s.Read(t));
}

TEST(TimetableStore, ReadersNeverSeeATornTimetable) {
  TimetableStore s;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (uint64_t v = 1; !stop.load(); ++v) {
      const auto x = static_cast<int64_t>(v % 1000 + 1) * kMs;
      s.Publish(Timetable{v, x, x, 0, x, 0, x});  // every field derived from v
      for (int spin = 0; spin < 200; ++spin) std::atomic_signal_fence(std::memory_order_seq_cst);
    }
  });
  int torn = 0;
  int reads = 0;
  const int64_t until = RealtimeNs() + 300 * kMs;
  while (reads < 20000 && RealtimeNs() < until) {
    Timetable t;
    if (!s.Read(t)) continue;
    ++reads;
    const auto x = static_cast<int64_t>(t.version % 1000 + 1) * kMs;
    if (t.epoch_ns != x || t.period_ns != x || t.window_ns != x || t.max_wait_ns != x) ++torn;
  }
  stop.store(true);
  writer.join();
  EXPECT_EQ(torn, 0);
  EXPECT_GT(reads, 0);
}

TEST(SpscRing, FifoAndDropsWhenFull) {
  SpscRing<int, 4> r;
  for (int i = 0; i < 6; ++i) r.Push(i);
  EXPECT_EQ(r.Dropped(), 2u);
  int v = -1;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(r.Pop(v));
    EXPECT_EQ(v, i);
  }
  EXPECT_FALSE(r.Pop(v));
}

TEST(SpscRing, ProducerConsumerThreads) {
  SpscRing<uint64_t, 256> r;
  constexpr uint64_t kN = 50000;
  std::thread producer([&] {
    for (uint64_t i = 1; i <= kN; ++i) {
      while (!r.Push(i)) std::this_thread::yield();
    }
  });
  uint64_t expect = 1;
  uint64_t v = 0;
  while (expect <= kN) {
    if (r.Pop(v)) {
      ASSERT_EQ(v, expect);
      ++expect;
    } else {
      std::this_thread::yield();
    }
  }
  producer.join();
}

TEST(DeviceGate, CalibrationTakesTheFreshestRead) {
  // GPU timer = host - 1000 ns; reads arrive 50..500 ns after the write.
  const int64_t host[] = {10'550, 20'050, 30'500, 40'100};
  const int64_t gpu[] = {9'000, 19'000, 29'000, 39'000};
  EXPECT_EQ(CalibrateHostMinusGpu(host, gpu, 4), 1'050);
  EXPECT_EQ(CalibrateHostMinusGpu(host, gpu, 0), 0);
}

TEST(DeviceGate, UnavailableWithoutAGpuDriver) {
  // This machine has no libcuda.so.1 loaded: no slot, host gate.
  uint64_t owner = 1;
  EXPECT_EQ(DeviceGate::Prepare(nullptr, 50'000'000, owner), -1);
  EXPECT_EQ(owner, 0u);
  EXPECT_EQ(DeviceGate::Status(), DeviceGateStatus::kUnavailable);
  EXPECT_FALSE(DeviceGate::StreamIsCapturing(nullptr));
  EXPECT_EQ(DeviceGate::ServiceWaits(RealtimeNs()), INT64_MAX);
}

TEST(DeviceGate, SlotLayoutIsStable) {
  // The kernel and the host agree on this layout (both compile device_gate_slot.hpp).
  EXPECT_EQ(sizeof(DeviceGateSlot), 896u);
  EXPECT_EQ(alignof(DeviceGateSlot), 128u);
}

// The gate kernel's turns, run on the host with a simulated GPU timer that moves only when the
// kernel pauses (so the times below are exact): `at(t)` is called as the timer passes t, where a
// test writes what the host would relay meanwhile.
struct KernelRun {
  DeviceGateSlot slot{};
  int64_t t = 1'000'000'000;
  std::vector<std::pair<int64_t, std::function<void(DeviceGateSlot&)>>> at;

  void Turns(const TurnSet& s, int64_t max_wait_ns) {
    slot.turn_seq = slot.turn_seq + 1;
    slot.turn_wire_ns = s.wire_ns;
    slot.turn_period_ns = s.period_ns;
    slot.turn_max_wait_ns = max_wait_ns;
    for (uint32_t i = 0; i < s.count; ++i) {
      const TurnPartner& p = s.partners[i];
      slot.turn_partners[i][0] = p.higher ? 1 : 0;
      slot.turn_partners[i][1] = p.wire_ns;
      slot.turn_partners[i][2] = p.compute_ns;
      slot.turn_partners[i][3] = p.begun_ns;
      slot.turn_partners[i][4] = p.ended_ns;
    }
    slot.turn_count = s.count;
    slot.turn_seq = slot.turn_seq + 1;
  }
  // One phase-start launch that only takes turns; returns how long the stream was held.
  int64_t Phase() {
    const int64_t start = t;
    RunGateKernel(
        &slot, 0, -1, kGateTurns, slot.cancel, [&] { return t; },
        [&](int64_t ns) {
          t += ns;
          for (auto& [when, what] : at) {
            if (when != 0 && t >= when) {
              what(slot);
              when = 0;
            }
          }
        },
        [] {});
    return t - start;
  }
};

constexpr int64_t kMsNs = 1'000'000;

TEST(GateKernelTurns, NoPartnerInAPhaseNoHoldAndTheBeginIsStamped) {
  KernelRun k;
  EXPECT_EQ(k.Phase(), 0);
  EXPECT_EQ(k.slot.edge_begun_gpu_ns, k.t) << "stamped without turns too";
  TurnSet s{5 * kMsNs, 20 * kMsNs, 1, {}};
  s.partners[0] = {7, false, 6 * kMsNs, 10 * kMsNs, k.t - 9 * kMsNs, k.t - 4 * kMsNs};
  k.Turns(s, 50 * kMsNs);
  EXPECT_EQ(k.Phase(), 0) << "the partner's phase ended";
  EXPECT_EQ(k.slot.yields, 0u);
  EXPECT_EQ(k.slot.launches, k.slot.finished);
}

TEST(GateKernelTurns, HoldsTheStreamUntilAnEqualsEndIsRelayed) {
  KernelRun k;
  TurnSet s{5 * kMsNs, 20 * kMsNs, 1, {}};
  s.partners[0] = {7, false, 6 * kMsNs, 10 * kMsNs, k.t - 1 * kMsNs, 0};
  k.Turns(s, 50 * kMsNs);
  const int64_t end = k.t + 3 * kMsNs;  // relayed as the timer passes it
  k.at.emplace_back(end, [&](DeviceGateSlot& g) {
    g.turn_seq = g.turn_seq + 1;
    g.turn_partners[0][4] = end;
    g.turn_seq = g.turn_seq + 1;
  });
  const int64_t held = k.Phase();
  EXPECT_GE(held, 3 * kMsNs);
  EXPECT_LT(held, 3 * kMsNs + 10'000) << "left within a step of the end's arrival";
  EXPECT_EQ(k.slot.edge_begun_gpu_ns, k.t) << "the begin is when the stream went on";
  EXPECT_EQ(k.slot.yields, 1u);
  EXPECT_EQ(k.slot.turn_wait_ns, held);
  EXPECT_EQ(k.slot.turns_in_a_row, 1u);
  EXPECT_EQ(k.Phase(), 0);
  EXPECT_EQ(k.slot.turns_in_a_row, 0u);
}

TEST(GateKernelTurns, AHigherPartnerThatNeverEndsHoldsOneNaturalPeriodWithinMaxWait) {
  KernelRun k;
  TurnSet s{5 * kMsNs, 20 * kMsNs, 1, {}};
  s.partners[0] = {7, true, 30 * kMsNs, 40 * kMsNs, k.t - 1 * kMsNs, 0};
  k.Turns(s, 50 * kMsNs);
  const int64_t held = k.Phase();
  EXPECT_GE(held, 20 * kMsNs);
  EXPECT_LT(held, 20 * kMsNs + 10'000);
  k.slot.turn_partners[0][3] = k.t;  // it begins again: max wait 8 ms bounds the hold now
  k.slot.turn_max_wait_ns = 8 * kMsNs;
  EXPECT_LT(k.Phase(), 8 * kMsNs + 10'000);
}

TEST(GateKernelTurns, AnEqualIsNotWaitedForAFourthPhaseInARow) {
  KernelRun k;
  TurnSet s{5 * kMsNs, 20 * kMsNs, 1, {}};
  s.partners[0] = {7, false, 6 * kMsNs, 10 * kMsNs, 0, 0};
  k.Turns(s, 50 * kMsNs);
  for (int i = 0; i < 4; ++i) {
    k.slot.turn_partners[0][3] = k.t;  // begun just now, never ended: held to its rest
    const int64_t held = k.Phase();
    if (i < 3) {
      EXPECT_GT(held, 0) << i;
    } else {
      EXPECT_EQ(held, 0) << "three in a row";
    }
  }
}

TEST(GateKernelTurns, ACancelledLaunchLeavesAtOnceAndABadSetIsNotUsed) {
  KernelRun k;
  TurnSet s{5 * kMsNs, 20 * kMsNs, 1, {}};
  s.partners[0] = {7, true, 6 * kMsNs, 10 * kMsNs, k.t, 0};
  k.Turns(s, 50 * kMsNs);
  const int64_t start = k.t;
  RunGateKernel(
      &k.slot, 0, -1, kGateTurns, k.slot.cancel + 1, [&] { return k.t; },
      [&](int64_t ns) { k.t += ns; }, [] {});
  EXPECT_EQ(k.t, start) << "an older generation: no hold";
  k.slot.turn_wire_ns = 0;  // fails ValidateTurnSet
  EXPECT_EQ(k.Phase(), 0);
  k.slot.turn_wire_ns = 5 * kMsNs;
  k.slot.turn_count = kMaxTurnPartners + 1;
  EXPECT_EQ(k.Phase(), 0);
}

// A phase whose timetable cannot be read (the host's sequence lock stays odd through every try)
// goes, counted as a fail-open; no timetable, a collective inside a phase, or a cancelled launch
// is none.
TEST(GateKernel, ATimetableThatCannotBeReadFailsOpenCounted) {
  DeviceGateSlot slot{};
  slot.valid = 1;
  slot.period_ns = 20 * kMsNs;
  slot.window_ns = 2 * kMsNs;
  slot.max_wait_ns = 20 * kMsNs;
  slot.max_wait_cap_ns = 50 * kMsNs;
  slot.seq = 1;  // a writer never finished
  int64_t t = 1'000'000'000;
  const auto run = [&](uint32_t what, uint32_t generation) {
    RunGateKernel(
        &slot, 0, -1, what, generation, [&] { return t; }, [&](int64_t ns) { t += ns; }, [] {});
  };
  run(kGateDecide, slot.cancel);
  EXPECT_EQ(slot.failed_open, 1u);
  EXPECT_EQ(slot.waits, 0u);
  EXPECT_EQ(t, 1'000'000'000) << "no hold";
  run(kGateDecide | kGateMidPhase, slot.cancel);
  run(kGateDecide, slot.cancel + 1);
  EXPECT_EQ(slot.failed_open, 1u);
  slot.seq = 2;
  slot.valid = 0;
  run(kGateDecide, slot.cancel);
  EXPECT_EQ(slot.failed_open, 1u) << "no timetable is no fail-open";
  EXPECT_EQ(slot.launches, slot.finished);
}

// The kernel counts late phases as the host gate does (CountsLate): a phase held to a window it
// came after is late, one that arrived early and waited is not (it reported every wait as late:
// GPU jobs were re-planned for lateness the host gate and the simulator never see).
TEST(GateKernel, AnEarlyArrivalWaitsButIsNotLate) {
  DeviceGateSlot slot{};
  slot.valid = 1;
  slot.epoch_ns = 0;
  slot.period_ns = 20 * kMsNs;
  slot.window_ns = 2 * kMsNs;
  slot.max_wait_ns = 20 * kMsNs;
  slot.max_wait_cap_ns = 50 * kMsNs;
  int64_t t = 0;
  const auto phase_at = [&](int64_t at) {
    t = at;
    // The timer moves a microsecond a read as well (the kernel spins its last 8 µs unpaused).
    RunGateKernel(
        &slot, 0, -1, kGateDecide, slot.cancel, [&] { return t += 1'000; },
        [&](int64_t ns) { t += ns; }, [] {});
  };
  phase_at(1'000 * kMsNs + 15 * kMsNs);  // 5 ms before its window: early
  EXPECT_EQ(slot.waits, 1u);
  EXPECT_EQ(slot.late, 0u);
  phase_at(2'000 * kMsNs + 5 * kMsNs);  // 5 ms after its window opened, past the slack: late
  EXPECT_EQ(slot.waits, 2u);
  EXPECT_EQ(slot.late, 1u);
}

TEST(GateKernelTurns, TheEdgeKernelStampsThePhasesEnd) {
  DeviceGateSlot slot{};
  RunEdgeKernel(
      &slot, [] { return int64_t{42}; }, [] {});
  EXPECT_EQ(slot.edge_ended_gpu_ns, 42);
}

}  // namespace
}  // namespace metronome::shim
