// Safety of the shim against its scheduler, in process: the shim's core (runtime + background
// thread) talks to a raw ZeroMQ ROUTER played by the test. Collectives are driven through the
// runtime's caller path exactly as the exported ncclX wrappers do.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "host_gate.hpp"
#include "intercept.hpp"
#include "metronome/common/clock.hpp"
#include "metronome/common/protocol.hpp"
#include "raw_peer.hpp"
#include "runtime.hpp"

namespace metronome::shim {
namespace {

using namespace std::chrono_literals;
namespace proto = metronome::proto;

constexpr int64_t kMaxWaitNs = 50'000'000;

template <class Pred>
bool WaitFor(Pred p, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (p()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return p();
}

struct ShimUnderTest {
  explicit ShimUnderTest(const std::string& endpoint, int64_t silence_ns = 600'000'000,
                         const std::string& curve_server_key = "", uint64_t chunk_bytes = 0) {
    Config c;
    c.chunk_bytes = chunk_bytes;
    c.curve_server_key = curve_server_key;
    c.scheduler = endpoint;
    c.max_wait_ns = kMaxWaitNs;
    c.silence_ns = silence_ns;
    c.gate = GateKind::kHost;
    c.log_level = LogLevel::kWarn;
    c.node = "test-node";
    c.node_share = false;  // this rank talks to the test's scheduler itself
    rt = new Runtime(c);   // leaked on purpose, like the real one
    Runtime::InstallForTesting(rt);
    static uintptr_t next = 0x1000;
    comm = reinterpret_cast<ncclComm_t>(next += 0x100);
    ncclUniqueId id{};
    id.internal[0] = static_cast<char>(next);
    CommOrigin o;
    o.how = "test";
    o.id = &id;
    o.nranks = 2;
    o.rank = 0;
    EXPECT_NE(rt->OnCommCreated(comm, o), nullptr);
  }
  ~ShimUnderTest() {
    rt->OnCommDestroyed(comm, "destroyed");
    rt->StopClient(1'000'000'000);
  }

  // One collective through the caller path; returns how long the gate held the caller (ns), as
  // the shim measures it: exactly 0 when the gate let it go at once (a wall-clock measure of the
  // whole call would also count the test thread being descheduled on a loaded machine).
  int64_t Collective() {
    const auto tok = rt->BeforeCollective(comm, Op::kAllReduce, 4096, nullptr);
    rt->AfterCollective(tok, ncclSuccess);
    return tok.hold_ns;
  }
  JobState* Job() {
    auto jobs = rt->Jobs();
    return jobs.empty() ? nullptr : jobs.back();
  }
  uint64_t Version() {
    JobState* j = Job();
    return j ? j->store.Version() : 0;
  }

  // Teaches the shim a steady rhythm: `iterations` repeats of `calls` (offsets from an
  // iteration's start), `period_ns` apart and ending now, recorded into each communicator's event
  // ring as the caller's path records them. The background thread judges rhythms on what it reads
  // there; taught this way the judgement does not depend on how late a loaded machine wakes a
  // sleeping test thread (a CPU-throttled CI host: by milliseconds). Returns once a profile
  // report covers them.
  struct TaughtCall {
    ncclComm_t comm;
    int64_t at_ns;
    int64_t duration_ns;
    uint64_t bytes;
  };
  void TeachRhythm(RawPeer& peer, const std::vector<TaughtCall>& calls, int64_t period_ns,
                   int iterations) {
    const int64_t base = RealtimeNs() - (iterations + 1) * period_ns;
    for (int i = 0; i < iterations; ++i) {
      for (const TaughtCall& c : calls) {
        const int64_t start = base + i * period_ns + c.at_ns;
        CommState* st = rt->Find(c.comm);
        ASSERT_NE(st, nullptr);
        ASSERT_TRUE(st->ring.Push(CollEvent{start, start + c.duration_ns,
                                            static_cast<uint32_t>(Op::kAllReduce), c.bytes, 0}))
            << "event ring full";
      }
    }
    ASSERT_TRUE(WaitFor(
        [&] {
          auto reports = peer.Reports();
          return !reports.empty() &&
                 reports.begin()->second.iterations >= static_cast<uint64_t>(iterations);
        },
        5s))
        << "the taught phases were not reported";
  }

  Runtime* rt = nullptr;
  ncclComm_t comm = nullptr;
};

// From the peer's thread, once the shim has pinged: pushes `t` with its epoch at now, at most
// every 100 ms (or at `epoch_ns` when given); `no_gate` flags it "no gate" on the wire whatever
// its window (the flag is the encoded push's last byte).
void PushEvery100ms(RawPeer& p, Timetable t, bool no_gate = false, const YieldSet& yields = {},
                    std::optional<int64_t> epoch_ns = std::nullopt) {
  static thread_local int64_t last = 0;
  const int64_t now = RealtimeNs();
  if (p.Pings() == 0 || now - last < 100'000'000) return;
  last = now;
  proto::TimetablePush push;
  push.job_id = p.JobId();
  push.timetable = t;
  push.timetable.epoch_ns = epoch_ns.value_or(now);
  push.yields = yields;
  std::string bytes = proto::Encode(push);
  if (no_gate) bytes.back() = '\0';
  p.SendRaw(bytes);
}

// A job with no gate of its own yields to a higher-priority window of 15 ms every 20 ms. Each of
// its collectives needs 0.5 ms of the 1 ms gap its two-collective phase needs, and waits at most
// 4 ms: it is held (until 15 ms) exactly when it arrives in [11, 15) ms of the period; earlier
// no gap comes within its max wait and it goes at once, and after the window it is clear. The
// phases' starts sweep the period, and each collective is judged by where the shim saw it arrive
// (its own clock and offset), so the verdict does not depend on how late a loaded machine wakes
// the test. The measured holds add that lateness to the decided wait (tens of milliseconds on a
// CPU-throttled host), so their bound is checked on most holds, not on the worst: a gate that
// ignored the set's max wait would hold them up to 15 ms, every one beyond 5 ms. The push's
// epoch is the service's default, 0 (the Unix epoch): the shim moves the set's epoch to its
// clock before its gates use it (a gate taking times from 1970 yielded to nothing).
TEST(ShimSafety, YieldsHoldCollectivesForHigherWindowsWithinTheirMaxWait) {
  constexpr int64_t kPeriod = 20'000'000;
  const int64_t epoch = RealtimeNs();  // where the test's windows start, on the shim's clock
  YieldSet yields;
  yields.need_ns = 1 * kMs;
  yields.max_wait_ns = 4 * kMs;
  yields.count = 1;
  yields.windows[0] = {kPeriod, FloorMod(epoch, kPeriod), 15 * kMs};  // from the wire's epoch 0
  RawPeer peer;
  peer.tick = [&](RawPeer& p) {
    PushEvery100ms(p, Timetable{1, 0, kPeriod, 0, kPeriod, 0, 0}, false, yields, 0);
  };
  peer.Start();
  ShimUnderTest shim(peer.Endpoint());
  // Phases of two collectives after 3.3 ms of compute: their starts sweep the 20 ms period.
  constexpr int64_t kCompute = 3'300'000;
  shim.TeachRhythm(peer, {{shim.comm, 0, 20'000, 4096}, {shim.comm, 40'000, 20'000, 4096}},
                   kCompute + 60'000, 200);
  ASSERT_TRUE(WaitFor([&] { return shim.Version() >= 1 && shim.rt->clock_valid.load(); }, 5s))
      << "no timetable in force";
  const CommState* st = shim.rt->Find(shim.comm);
  ASSERT_NE(st, nullptr);
  int judged = 0;
  int expected_holds = 0;
  std::vector<std::string> wrong;
  std::vector<int64_t> holds;
  int64_t end = RealtimeNs();
  for (int i = 0; i < 80; ++i) {
    end = SleepUntilRealtime(end + kCompute);
    for (int k = 0; k < 2; ++k) {  // a phase start, then a collective inside the phase
      const bool gated = !st->observe_only.load();
      const auto tok = shim.rt->BeforeCollective(shim.comm, Op::kAllReduce, 4096, nullptr);
      shim.rt->AfterCollective(tok, ncclSuccess);
      end = RealtimeNs();
      if (tok.hold_ns > 0) holds.push_back(tok.hold_ns);
      const int64_t arrival = tok.start_ns - tok.hold_ns + shim.rt->server_minus_local_ns.load();
      const int64_t at = FloorMod(arrival - epoch, kPeriod);
      const bool near_edge = std::abs(at - 11 * kMs) < kMs / 4 || std::abs(at - 15 * kMs) < kMs / 4;
      if (!gated || near_edge) continue;
      const bool expect = at >= 11 * kMs && at < 15 * kMs;
      ++judged;
      expected_holds += expect ? 1 : 0;
      if (expect != (tok.hold_ns > 0)) {
        wrong.push_back(std::to_string(static_cast<double>(at) / 1e6) +
                        " ms: " + (expect ? "not held" : "held"));
      }
    }
  }
  peer.Stop();
  std::sort(holds.begin(), holds.end());
  const int64_t median = holds.empty() ? 0 : holds[holds.size() / 2];
  const auto beyond =
      std::count_if(holds.begin(), holds.end(), [](int64_t h) { return h > 5 * kMs; });
  std::printf(
      "yields: %d collectives judged, %d held as the rule says; holds median %.2f ms, worst "
      "%.2f ms, %lld beyond 5 ms\n",
      judged, expected_holds, static_cast<double>(median) / 1e6,
      static_cast<double>(holds.empty() ? 0 : holds.back()) / 1e6, static_cast<long long>(beyond));
  for (const std::string& w : wrong) std::printf("  arrived at %s\n", w.c_str());
  EXPECT_FALSE(st->observe_only.load()) << "the taught rhythm was not judged stable";
  EXPECT_GE(judged, 80) << "the communicator was observed, not gated, most of the time";
  EXPECT_GE(expected_holds, 8);
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " collectives held against the rule";
  EXPECT_EQ(st->yielded.load(), holds.size());
  EXPECT_LE(beyond * 2, static_cast<long>(holds.size())) << "held beyond the yields' max wait";
}

// Taking turns (common/turn.hpp) against a scheduler that relays edges: the shim holds a phase
// start while a partner is in its phase, as the edges the scheduler relays say, until the
// partner's end arrives, and a higher partner that never ends holds it one natural period (its
// bound); without an edge it never holds. It sends its own phases' begin and end, on the
// scheduler's clock, while the scheduler asks for them; every hold counts as a yield.
TEST(ShimSafety, TakesTurnsOnTheRelayedEdgesAndSendsItsOwn) {
  constexpr int64_t kPeriod = 20 * kMs;  // its own natural period: the longest a turn holds
  std::atomic<int> version{0};           // the set pushed; 2: the partner is of higher priority
  std::atomic<int64_t> ahead{0};         // a begin dated ahead of the clock, sent once when set
  std::atomic<bool> forget{false};       // answer as a restarted scheduler (it knows no one)
  PartnerEdges partner(7);
  RawPeer peer;
  peer.welcome_features = proto::kFeatureTurns;
  peer.tick = [&](RawPeer& p) {
    PushEvery100ms(p, Timetable{1, 0, kPeriod, 0, kPeriod, 0, 0});
    static thread_local int sent = 0;
    if (p.Pings() > 0 && version.load() != sent) {
      sent = version.load();
      proto::TurnPush t{p.JobId(), static_cast<uint64_t>(sent), true, {}};
      t.turns = {5 * kMs, kPeriod, 1, {}};
      t.turns.partners[0] = {7, sent == 2, 6 * kMs, 10 * kMs, 0, 0};
      p.Send(t);
    }
    partner.Tick(p);
    static thread_local int64_t ahead_sent = 0;
    if (ahead.load() != ahead_sent) {
      ahead_sent = ahead.load();
      p.Send(proto::TurnEdge{p.JobId(), 7, true, ahead_sent});
    }
    if (forget.exchange(false)) p.Send(proto::Error{proto::ErrorCode::kUnexpected, "restarted"});
  };
  peer.Start();
  ShimUnderTest shim(peer.Endpoint());
  constexpr int64_t kCompute = 3'300'000;
  shim.TeachRhythm(peer, {{shim.comm, 0, 20'000, 4096}, {shim.comm, 40'000, 20'000, 4096}},
                   kCompute + 60'000, 200);
  version = 1;
  const CommState* st = shim.rt->Find(shim.comm);
  ASSERT_NE(st, nullptr);
  ASSERT_TRUE(WaitFor(
      [&] {
        return shim.Job()->turns.MayTakeTurns() && shim.rt->clock_valid.load() &&
               !st->observe_only.load();
      },
      5s))
      << "no turns in force";
  const auto phase = [&] {  // a phase of two collectives; the hold at its start
    const int64_t hold = shim.Collective();
    shim.Collective();
    return hold;
  };
  const auto seen = [&](bool begun, int64_t at) {
    return WaitFor(
        [&] {
          TurnSet s;
          return shim.Job()->turns.Read(s) && s.count == 1 &&
                 (begun ? s.partners[0].begun_ns : s.partners[0].ended_ns) == at;
        },
        2s);
  };
  EXPECT_EQ(phase(), 0) << "no partner in a phase: no hold";

  // An equal in its phase: held until its end arrives, 6 ms after its begin.
  const int64_t b1 = RealtimeNs() + shim.rt->server_minus_local_ns.load();
  partner.begin_at = b1;
  ASSERT_TRUE(seen(true, b1));
  partner.end_at = b1 + 6 * kMs;
  const int64_t held = phase();
  EXPECT_GT(held, 3 * kMs);
  EXPECT_LT(held, kPeriod) << "held past the end's arrival";
  EXPECT_EQ(phase(), 0) << "the partner's phase has ended";

  // A higher partner that begins and never ends: one natural period at most.
  version = 2;
  ASSERT_TRUE(WaitFor([&] { return shim.Job()->turns_version == 2; }, 2s));
  const int64_t b2 = RealtimeNs() + shim.rt->server_minus_local_ns.load();
  partner.begin_at = b2;
  ASSERT_TRUE(seen(true, b2));
  const int64_t bounded = phase();
  EXPECT_GE(bounded, kPeriod - 2 * kMs);
  EXPECT_LT(bounded, 3 * kPeriod);
  EXPECT_EQ(st->yielded.load(), 2u);

  // A begin dated a second ahead of the scheduler's clock is ignored, counted: kept as the
  // partner's latest it would hold every phase to its bound.
  const uint64_t rejected = shim.rt->counters.rx_rejected.load();
  ahead = RealtimeNs() + shim.rt->server_minus_local_ns.load() + 1'000 * kMs;
  ASSERT_TRUE(WaitFor([&] { return shim.rt->counters.rx_rejected.load() > rejected; }, 2s));
  EXPECT_TRUE(seen(true, b2)) << "the edge dated ahead replaced the partner's begin";
  // Past b2's quiet bound (twice the partner's 16 ms natural period), nothing holds.
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(
      std::chrono::nanoseconds(b2 - shim.rt->server_minus_local_ns.load() + 40 * kMs)));
  EXPECT_EQ(phase(), 0);

  // A scheduler that no longer knows the job (it restarted) takes its partners with it: their
  // numbers were its own.
  forget = true;
  EXPECT_TRUE(WaitFor([&] { return !shim.Job()->turns.MayTakeTurns(); }, 2s));

  // Its own edges, begun then ended, each phase's end after its begin.
  ASSERT_TRUE(WaitFor([&] { return peer.Edges().size() >= 6; }, 2s));
  peer.Stop();
  const std::vector<proto::PhaseEdge> edges = peer.Edges();
  int begins = 0, ends = 0;
  int64_t last_begin = 0;
  for (const proto::PhaseEdge& e : edges) {
    EXPECT_EQ(e.rank, 0u);
    if (e.begun) {
      ++begins;
      last_begin = e.at_ns;
    } else {
      ++ends;
      EXPECT_GE(e.at_ns, last_begin);
    }
  }
  EXPECT_GE(begins, 3);
  EXPECT_GE(ends, 3);
}

// A job with two communicators, as tensor plus data parallelism has them: a split one with calls
// spread through the compute, and the parent with one burst an iteration. Once their rhythms are
// known only the parent, whose rhythm the timetable describes, is held; the split one is
// observed.
TEST(ShimSafety, OnlyTheCommunicatorThatCarriesTheJobsRhythmIsHeld) {
  RawPeer peer;
  peer.tick = [&](RawPeer& p) {
    PushEvery100ms(p, Timetable{1, 0, 40'000'000, 0, 4'000'000, 0, 40'000'000});
  };
  peer.Start();
  ShimUnderTest shim(peer.Endpoint());
  auto* split = reinterpret_cast<ncclComm_t>(reinterpret_cast<uintptr_t>(shim.comm) + 0x10);
  CommOrigin o;
  o.how = "Split";
  o.parent = shim.comm;
  o.nranks = 2;
  o.rank = 0;
  ASSERT_NE(shim.rt->OnCommCreated(split, o), nullptr);
  // A 16 ms iteration: four "tensor-parallel" calls 2 ms apart through the compute, then the
  // "data-parallel" burst of three 25 MiB buckets.
  std::vector<ShimUnderTest::TaughtCall> iteration;
  iteration.reserve(7);
  for (int k = 0; k < 4; ++k) {
    iteration.push_back({split, int64_t{2'000'000} * (k + 1), 100'000, 1 << 20});
  }
  for (int b = 0; b < 3; ++b) {
    iteration.push_back({shim.comm, 12'000'000 + b * 1'000'000, 900'000, 25 << 20});
  }
  shim.TeachRhythm(peer, iteration, 16'000'000, 100);
  ASSERT_TRUE(WaitFor([&] { return shim.Version() >= 1; }, 5s)) << "no timetable in force";
  const CommState* s = shim.rt->Find(split);
  const CommState* m = shim.rt->Find(shim.comm);
  ASSERT_NE(s, nullptr);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(s->observe_only.load()) << "the split communicator may be held";
  EXPECT_FALSE(m->observe_only.load()) << "the parent, which carries the rhythm, is not held";
  // Eight more iterations in real time: the parent's phases arrive anywhere in its 40 ms period
  // and wait for its 4 ms window; the split one's calls go at once.
  int64_t split_held = 0;
  int64_t parent_held = 0;
  for (int i = 0; i < 8; ++i) {
    for (int k = 0; k < 4; ++k) {
      std::this_thread::sleep_for(2ms);
      const auto tok = shim.rt->BeforeCollective(split, Op::kAllReduce, 1 << 20, nullptr);
      shim.rt->AfterCollective(tok, ncclSuccess);
      split_held += tok.hold_ns;
    }
    std::this_thread::sleep_for(4ms);
    for (int b = 0; b < 3; ++b) {
      const auto tok = shim.rt->BeforeCollective(shim.comm, Op::kAllReduce, 25 << 20, nullptr);
      shim.rt->AfterCollective(tok, ncclSuccess);
      parent_held += tok.hold_ns;
    }
  }
  peer.Stop();
  std::printf("held over 8 iterations: parent %.1f ms, split %.1f ms\n",
              static_cast<double>(parent_held) / 1e6, static_cast<double>(split_held) / 1e6);
  EXPECT_EQ(split_held, 0) << "the split communicator was held";
  EXPECT_GT(parent_held, 0) << "the parent was never held";
  shim.rt->OnCommDestroyed(split, "destroyed");
}

// A job with a chunk size (METRONOME_CHUNK_KIB) issues an all-reduce larger than it as
// consecutive calls on contiguous parts of the buffers (whole 256-byte blocks but the last), each
// through the gate. NCCL pairs the k-th call of every rank, so the parts are the same whatever
// the timetable says, before one arrives, while the job yields and after it stops; inside a group
// the call is one, as the application made it.
TEST(ShimSafety, AJobWithAChunkSizeIssuesTheSamePartsWhateverItsTimetable) {
  YieldSet yields;
  yields.need_ns = 1'000'000;
  yields.max_wait_ns = 1'000'000;
  yields.count = 1;
  yields.windows[0] = {20'000'000, 0, 1'000'000};
  RawPeer peer;
  std::atomic<bool> push{false};
  peer.tick = [&](RawPeer& p) {
    if (push) PushEvery100ms(p, Timetable{1, 0, 20'000'000, 0, 20'000'000, 0, 0}, false, yields);
  };
  peer.Start();
  ShimUnderTest shim(peer.Endpoint(), 600'000'000, "", 1u << 20);
  struct Part {
    size_t offset;
    size_t count;
  };
  std::vector<Part> parts;
  auto record = [&](size_t offset, size_t count) {
    parts.push_back({offset, count});
    return ncclSuccess;
  };
  const size_t count = ((5u << 20) + 400) / sizeof(float);
  auto issue = [&](ncclComm_t comm) {
    parts.clear();
    EXPECT_EQ(ElementwiseCollective(Op::kAllReduce, count, ncclFloat32, comm, nullptr, record),
              ncclSuccess);
    return parts.size();
  };
  const CommState* st = shim.rt->Find(shim.comm);
  ASSERT_NE(st, nullptr);

  EXPECT_EQ(issue(shim.comm), 6u) << "no timetable yet";
  push = true;
  ASSERT_TRUE(WaitFor([&] { return shim.Job() != nullptr && shim.Job()->store.MayYield(); }, 5s))
      << "no yields in force";
  const uint64_t calls = st->calls.load();
  ASSERT_EQ(issue(shim.comm), 6u) << "yielding";
  EXPECT_EQ(st->calls.load(), calls + 6) << "every part goes through the gate";
  size_t next = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    EXPECT_EQ(parts[k].offset, next) << "part " << k;
    if (k + 1 < parts.size()) {
      EXPECT_EQ(parts[k].count % (256 / sizeof(float)), 0u);
    }
    next += parts[k].count;
  }
  EXPECT_EQ(next, count);

  ++Tls().group_depth;
  EXPECT_EQ(issue(shim.comm), 1u) << "inside a group";
  --Tls().group_depth;

  // The scheduler stops sending yields: the same parts.
  peer.tick = [&](RawPeer& p) {
    PushEvery100ms(p, Timetable{2, 0, 20'000'000, 0, 20'000'000, 0, 0});
  };
  ASSERT_TRUE(WaitFor([&] { return !shim.Job()->store.MayYield(); }, 5s));
  EXPECT_EQ(issue(shim.comm), 6u) << "after the yields";
  peer.Stop();
  EXPECT_EQ(shim.rt->Parts(5u << 20), 5u);
  EXPECT_EQ(Runtime(Config{}).Parts(5u << 20), 1u) << "a job without a chunk size";
}

TEST(ShimSafety, SchedulerAbsentRunsUngated) {
  ShimUnderTest shim("tcp://127.0.0.1:1");  // nothing listens there
  int64_t worst = 0;
  for (int i = 0; i < 40; ++i) {
    std::this_thread::sleep_for(3ms);
    worst = std::max(worst, shim.Collective());
  }
  EXPECT_EQ(shim.Version(), 0u);
  EXPECT_EQ(worst, 0) << "a collective was held without any scheduler";
  EXPECT_EQ(shim.rt->Find(shim.comm)->calls.load(), 40u);
}

TEST(ShimSafety, AbsurdTimetablesAndMalformedMessages) {
  RawPeer peer;
  std::atomic<uint64_t> version{1};
  std::atomic<int> step{0};
  std::mt19937_64 rng(7);
  peer.tick = [&](RawPeer& p) {
    if (peer.Pings() == 0) return;
    const std::string job = p.JobId();
    const int64_t now = RealtimeNs();
    proto::TimetablePush push;
    push.job_id = job;
    Timetable& t = push.timetable;
    t.version = version.fetch_add(1);
    t.epoch_ns = now;
    t.period_ns = 20'000'000;
    t.window_ns = 1'000'000;
    t.late_slack_ns = 0;
    t.max_wait_ns = 10'000'000'000;
    switch (step.fetch_add(1) % 14) {
      case 0:
        t.period_ns = 0;
        break;
      case 1:
        t.period_ns = -5'000'000;
        break;
      case 2:
        t.window_ns = 50'000'000;
        break;  // window > period: clamped
      case 3:
        t.epoch_ns = -(int64_t{1} << 61);
        break;  // far past
      case 4:
        t.epoch_ns = int64_t{1} << 61;
        break;  // far future
      case 5:
        t.epoch_ns = INT64_MAX;
        break;  // beyond any limit: rejected
      case 6:
        t.offset_ns = INT64_MIN;
        break;  // normalized
      case 7:
        t.late_slack_ns = -1;
        t.window_ns = -1;
        break;  // rejected
      case 8:
        t.period_ns = INT64_MAX;
        break;  // rejected
      case 9:
        t.version = 1;
        break;  // stale version
      case 10:
        p.SendRaw("");
        return;   // empty frame
      case 11: {  // garbage
        std::string junk(static_cast<size_t>(rng() % 200 + 1), '\0');
        for (char& c : junk) c = static_cast<char>(rng());
        p.SendRaw(junk);
        return;
      }
      case 12:
        p.SendFrames(proto::Encode(push), "extra");
        return;  // two frames
      case 13:
        p.SendRaw(std::string("\x93\x07\x06\x90", 4));
        return;  // unknown version
    }
    p.Send(push);
  };
  peer.Start();
  ShimUnderTest shim(peer.Endpoint());
  ASSERT_TRUE(WaitFor([&] { return shim.rt->counters.timetables_accepted.load() > 5; }, 5s));
  int64_t worst = 0;
  const auto end = std::chrono::steady_clock::now() + 1500ms;
  int n = 0;
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(1ms);
    worst = std::max(worst, shim.Collective());
    ++n;
  }
  peer.Stop();
  const auto& c = shim.rt->counters;
  EXPECT_LE(worst, kMaxWaitNs + 15'000'000) << "held beyond max wait";
  EXPECT_GT(c.timetables_rejected.load(), 10u);
  EXPECT_GT(c.timetables_stale.load(), 0u);
  EXPECT_GT(c.rx_rejected.load(), 10u);
  EXPECT_GT(c.timetables_accepted.load(), 10u);
  std::printf(
      "%d collectives, worst hold %.2f ms; timetables accepted %llu rejected %llu stale "
      "%llu; messages rejected %llu\n",
      n, static_cast<double>(worst) / 1e6,
      static_cast<unsigned long long>(c.timetables_accepted.load()),
      static_cast<unsigned long long>(c.timetables_rejected.load()),
      static_cast<unsigned long long>(c.timetables_stale.load()),
      static_cast<unsigned long long>(c.rx_rejected.load()));
}

// A job the planner leaves ungated gets an always-open timetable: its phases must go at once and
// none may count as gated, late, failed open or realigned, whether its window is the period or
// the push says "no gate" over a narrower window. The same loop under a window 1 ms shorter than
// the period, without the flag, is held and counted: the check can fail.
TEST(ShimSafety, AnAlwaysOpenTimetableNeverHoldsOrCountsAPhase) {
  struct Case {
    const char* what;
    int64_t window_ns;
    bool no_gate;
    bool expect_open;
  };
  for (const Case& k : {Case{"window = period", 20'000'000, false, true},
                        Case{"no gate over a 1 ms window", 1'000'000, true, true},
                        Case{"window = period - 1 ms", 19'000'000, false, false}}) {
    SCOPED_TRACE(k.what);
    RawPeer peer;
    peer.tick = [&](RawPeer& p) {
      PushEvery100ms(p, Timetable{1, 0, 20'000'000, 0, k.window_ns, 0, 1'000'000}, k.no_gate);
    };
    peer.Start();
    ShimUnderTest shim(peer.Endpoint());
    shim.TeachRhythm(peer, {{shim.comm, 0, 20'000, 4096}, {shim.comm, 40'000, 20'000, 4096}},
                     7'060'000, 100);
    ASSERT_TRUE(WaitFor([&] { return shim.Version() == 1; }, 5s)) << "no timetable in force";
    // Phases 7 ms apart under a 20 ms period: most arrive past the (zero) late slack.
    int64_t worst = 0;
    for (int i = 0; i < 60; ++i) {
      std::this_thread::sleep_for(7ms);
      worst = std::max(worst, shim.Collective());
      worst = std::max(worst, shim.Collective());
    }
    peer.Stop();
    const CommState* st = shim.rt->Find(shim.comm);
    ASSERT_NE(st, nullptr);
    const uint64_t acted =
        st->gated.load() + st->late.load() + st->failed_open.load() + st->realigned.load();
    std::printf(
        "%s: phases %llu, gated %llu late %llu failed_open %llu realigned %llu, "
        "worst hold %.2f ms\n",
        k.what, static_cast<unsigned long long>(st->phase_starts.load()),
        static_cast<unsigned long long>(st->gated.load()),
        static_cast<unsigned long long>(st->late.load()),
        static_cast<unsigned long long>(st->failed_open.load()),
        static_cast<unsigned long long>(st->realigned.load()), static_cast<double>(worst) / 1e6);
    ASSERT_GT(st->phase_starts.load(), 30u);
    if (k.expect_open) {
      EXPECT_EQ(acted, 0u);
      EXPECT_EQ(worst, 0) << "a phase was held under an always-open timetable";
    } else {
      EXPECT_GT(acted, 0u) << "the gated control case should hold or count phases";
    }
  }
}

TEST(ShimSafety, SchedulerDiesFailsOpenAndReRegisters) {
  auto peer = std::make_unique<RawPeer>();
  const std::string endpoint = peer->Endpoint();
  auto push_valid = [](RawPeer& p) {
    PushEvery100ms(p, Timetable{1, 0, 20'000'000, 0, 5'000'000, 1'000'000, 30'000'000});
  };
  peer->tick = push_valid;
  peer->Start();
  ShimUnderTest shim(endpoint, 500'000'000);
  ASSERT_TRUE(WaitFor([&] { return shim.Version() == 1; }, 5s)) << "no timetable in force";
  EXPECT_EQ(shim.rt->counters.welcomes.load(), 1u);
  // Gated collectives are held, never beyond max wait.
  int64_t worst = 0;
  for (int i = 0; i < 20; ++i) worst = std::max(worst, shim.Collective());
  EXPECT_LE(worst, kMaxWaitNs + 15'000'000);

  // The scheduler dies: within the silence bound (+ one loop) the shim fails open.
  peer->Stop();
  peer.reset();
  const auto died = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return shim.Version() == 0; }, 3s)) << "did not fail open";
  const auto fail_open_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - died)
          .count();
  EXPECT_LE(fail_open_ms, 500 + 400);
  EXPECT_EQ(shim.rt->counters.fail_open_events.load(), 1u);
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(2ms);
    EXPECT_EQ(shim.Collective(), 0) << "held while failed open";
  }

  // It comes back at the same address: the shim says hello again and takes the new timetable
  // (whose version numbering restarted at 1).
  RawPeer again(endpoint);
  again.tick = push_valid;
  again.Start();
  ASSERT_TRUE(WaitFor([&] { return again.Hellos() > 0; }, 5s)) << "no re-registration";
  ASSERT_TRUE(WaitFor([&] { return shim.Version() == 1; }, 5s)) << "new timetable not taken";
  EXPECT_EQ(shim.rt->counters.welcomes.load(), 2u);
  std::printf("failed open %lld ms after the scheduler died (bound 500 ms); re-registered\n",
              static_cast<long long>(fail_open_ms));
  again.Stop();
}

TEST(ShimSafety, CurveEncryptedScheduler) {
  char pub[41] = {};
  char sec[41] = {};
  ASSERT_EQ(zmq_curve_keypair(pub, sec), 0);
  RawPeer peer("tcp://127.0.0.1:*", sec);
  peer.Start();
  ShimUnderTest shim(peer.Endpoint(), 600'000'000, pub);
  ASSERT_TRUE(WaitFor([&] { return peer.Hellos() > 0 && peer.Pings() > 0; }, 5s))
      << "no hello over CURVE";
  ASSERT_TRUE(WaitFor([&] { return shim.rt->clock_valid.load(); }, 5s));
  peer.Stop();
}

}  // namespace
}  // namespace metronome::shim
