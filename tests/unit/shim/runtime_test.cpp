// The caller's path: phase-start detection, gating once per phase and once per group, modes.
#include "runtime.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "metronome/common/clock.hpp"

namespace metronome::shim {
namespace {

struct Fixture {
  explicit Fixture(Mode mode) {
    Config c;
    c.mode = mode;
    c.gate = GateKind::kHost;
    c.scheduler = "tcp://127.0.0.1:1";
    c.log_level = LogLevel::kWarn;
    c.max_wait_ns = 200 * kMs;
    c.node_share = false;  // this rank talks to the test's scheduler itself
    rt = new Runtime(c);   // leaked on purpose: the background thread may still look at it
    Runtime::InstallForTesting(rt);
    static uintptr_t next = 0x9000;
    comm = reinterpret_cast<ncclComm_t>(next += 0x40);
    CommOrigin o;
    o.how = "test";
    o.nranks = 4;
    o.rank = 1;
    st = rt->OnCommCreated(comm, o);
  }
  ~Fixture() { rt->StopClient(500 * kMs); }

  // A window of 1 ms every 50 ms, the next one opening `in_ns` from now.
  void PublishWindowIn(int64_t in_ns) {
    const int64_t now = RealtimeNs();
    Timetable t{1, now + in_ns, 50 * kMs, 0, 1 * kMs, 0, 50 * kMs};
    ASSERT_EQ(ValidateTimetable(t) & kTimetableRejectMask, 0u);
    st->job->store.Publish(t);
    rt->clock_valid.store(true);
  }
  int64_t Call(Op op = Op::kAllReduce, uint64_t bytes = 1024) {
    const int64_t t0 = RealtimeNs();
    const auto tok = rt->BeforeCollective(comm, op, bytes, nullptr);
    const int64_t held = RealtimeNs() - t0;
    rt->AfterCollective(tok, ncclSuccess);
    return held;
  }

  Runtime* rt = nullptr;
  ncclComm_t comm = nullptr;
  CommState* st = nullptr;
};

TEST(ShimRuntime, RegistersCommunicatorAndJob) {
  Fixture f(Mode::kEnforce);
  ASSERT_NE(f.st, nullptr);
  EXPECT_EQ(f.rt->Find(f.comm), f.st);
  EXPECT_EQ(f.st->rank.load(), 1u);
  EXPECT_EQ(f.st->job->world, 4u);
  EXPECT_EQ(f.st->job->job_id.rfind("local-", 0), 0u);  // no unique id, no METRONOME_JOB
  EXPECT_TRUE(f.rt->ClientStarted());
  f.rt->OnCommDestroyed(f.comm, "destroyed");
  EXPECT_EQ(f.rt->Find(f.comm), nullptr);
}

TEST(ShimRuntime, JobIdIsAHashOfTheUniqueId) {
  Fixture f(Mode::kObserve);
  ncclUniqueId id{};
  id.internal[3] = 9;
  CommOrigin o;
  o.id = &id;
  o.nranks = 2;
  o.rank = 0;
  auto* comm = reinterpret_cast<ncclComm_t>(uintptr_t{0x77000});
  CommState* a = f.rt->OnCommCreated(comm, o);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->job->job_id.rfind("nccl-", 0), 0u);
  // A split communicator joins its parent's job.
  CommOrigin s;
  s.parent = comm;
  s.nranks = 1;
  s.rank = 0;
  CommState* b = f.rt->OnCommCreated(reinterpret_cast<ncclComm_t>(uintptr_t{0x78000}), s);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->job, a->job);
}

TEST(ShimRuntime, GatesOnlyTheFirstCollectiveOfAPhase) {
  Fixture f(Mode::kEnforce);
  f.Call();  // first call ever: a phase start, but no timetable yet
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  f.PublishWindowIn(20 * kMs);
  const int64_t held = f.Call();  // gap 3 ms > 1 ms default threshold: phase start
  EXPECT_GE(held, 15 * kMs);
  EXPECT_LE(held, 60 * kMs);
  // The rest of the burst follows at once.
  for (int i = 0; i < 5; ++i) EXPECT_LT(f.Call(), 5 * kMs);
  EXPECT_EQ(f.st->gated.load(), 1u);
}

TEST(ShimRuntime, GatesOncePerGroup) {
  Fixture f(Mode::kEnforce);
  f.Call();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  f.PublishWindowIn(10 * kMs);
  ThreadState& ts = Tls();
  ts.group_depth = 1;
  ts.group_gated = false;
  const int64_t first = f.Call(Op::kSend);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));  // would be a phase start
  const int64_t second = f.Call(Op::kRecv);
  ts.group_depth = 0;
  ts.group_gated = false;
  EXPECT_GE(first, 5 * kMs);
  EXPECT_LT(second, 5 * kMs);
  EXPECT_EQ(f.st->gated.load(), 1u);
}

// The rest of a phase that the allowance is judged on (common's PhaseRest) counts the bytes the
// phase's collectives issued before the one at the gate, from the phase's start: its last
// collective, with little of the phase left, finishes into a higher window opening now; the next
// phase's first, with all of it left, waits for the window to pass.
TEST(ShimRuntime, TheRestOfAPhaseCountsItsIssuedBytesFromItsStart) {
  Fixture f(Mode::kEnforce);
  constexpr uint64_t kPart = 100;  // ten collectives of 100 bytes a phase
  f.st->phase_bytes.store(10 * kPart);
  f.rt->clock_valid.store(true);
  // Open timetable; one higher window of 80 ms every 300 ms, opening `in_ns` from now. The
  // phase needs 400 ms (40 ms a collective); an allowance of 60 ms (room for a slow machine).
  const auto yield_to_window_in = [&](int64_t in_ns) {
    const int64_t now = RealtimeNs();
    const Timetable open{1, now, 300 * kMs, 0, 300 * kMs, 0, 300 * kMs};
    YieldSet y;
    y.epoch_ns = now + in_ns;
    y.need_ns = 400 * kMs;
    y.max_wait_ns = 150 * kMs;
    y.allowance_ns = 60 * kMs;
    y.count = 1;
    y.windows[0] = {300 * kMs, 0, 80 * kMs};
    ASSERT_EQ(ValidateYieldSet(y) & kYieldRejectMask, 0u);
    f.st->job->store.Publish(open, y);
  };
  yield_to_window_in(200 * kMs);  // far: nine collectives go at once
  for (int i = 0; i < 9; ++i) EXPECT_LT(f.Call(Op::kAllReduce, kPart), 5 * kMs) << i;
  // The tenth: 40 ms of the phase left, ending 20 ms into the window: within the allowance.
  yield_to_window_in(20 * kMs);
  EXPECT_LT(f.Call(Op::kAllReduce, kPart), 5 * kMs);
  // A new phase: 400 ms left, 380 ms into the window: it waits for the window's end.
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  yield_to_window_in(20 * kMs);
  const int64_t held = f.Call(Op::kAllReduce, kPart);
  EXPECT_GE(held, 70 * kMs);
  EXPECT_LE(held, 160 * kMs);
}

TEST(ShimRuntime, ObserveNeverWaits) {
  Fixture f(Mode::kObserve);
  f.Call();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  f.PublishWindowIn(20 * kMs);
  EXPECT_LT(f.Call(), 5 * kMs);
  EXPECT_EQ(f.st->gated.load(), 0u);
  EXPECT_EQ(f.st->calls.load(), 2u);
}

TEST(ShimRuntime, OffTracksNothing) {
  Fixture f(Mode::kOff);
  EXPECT_EQ(f.st, nullptr);
  EXPECT_FALSE(g_shim_active.load());
}

TEST(ShimRuntime, NoClockEstimateMeansNoWait) {
  Fixture f(Mode::kEnforce);
  f.Call();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  f.PublishWindowIn(20 * kMs);
  f.rt->clock_valid.store(false);
  EXPECT_LT(f.Call(), 5 * kMs);
}

TEST(ShimRuntime, ByteSizes) {
  EXPECT_EQ(DataTypeSize(ncclFloat16), 2u);
  EXPECT_EQ(DataTypeSize(ncclBfloat16), 2u);
  EXPECT_EQ(DataTypeSize(ncclFloat), 4u);
  EXPECT_EQ(DataTypeSize(ncclInt64), 8u);
  EXPECT_EQ(DataTypeSize(ncclFloat8e4m3), 1u);
}

}  // namespace
}  // namespace metronome::shim

// A stand-in for the CUDA runtime's cudaStreamIsCapturing, exported by this test program (the shim
// finds it with dlsym): stream 0xcafe is "being captured into a CUDA graph".
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  *status = stream == reinterpret_cast<cudaStream_t>(uintptr_t{0xcafe})
                ? cudaStreamCaptureStatusActive
                : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

namespace metronome::shim {
namespace {

TEST(ShimRuntime, NoHostWaitWhileTheStreamIsCaptured) {
  Fixture f(Mode::kEnforce);
  f.Call();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  f.PublishWindowIn(20 * kMs);
  auto* captured = reinterpret_cast<cudaStream_t>(uintptr_t{0xcafe});
  const int64_t t0 = RealtimeNs();
  const auto tok = f.rt->BeforeCollective(f.comm, Op::kAllReduce, 1024, captured);
  const int64_t held = RealtimeNs() - t0;
  f.rt->AfterCollective(tok, ncclSuccess);
  EXPECT_LT(held, 5 * kMs);
  EXPECT_EQ(f.st->capture_passes.load(), 1u);
  EXPECT_EQ(f.st->gated.load(), 0u);
  // The same on a stream that is not captured waits.
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  auto* plain = reinterpret_cast<cudaStream_t>(uintptr_t{0xbeef});
  const int64_t t1 = RealtimeNs();
  const auto tok2 = f.rt->BeforeCollective(f.comm, Op::kAllReduce, 1024, plain);
  f.rt->AfterCollective(tok2, ncclSuccess);
  EXPECT_GE(RealtimeNs() - t1, 5 * kMs);
  EXPECT_EQ(f.st->gated.load(), 1u);
}

}  // namespace
}  // namespace metronome::shim

namespace metronome::shim {
namespace {

TEST(ShimRuntime, CommunicatorTableFillsReusesAndStaysConsistent) {
  Fixture f(Mode::kObserve);
  f.rt->OnCommDestroyed(f.comm, "destroyed");
  std::vector<ncclComm_t> comms;
  CommOrigin o;
  o.how = "test";
  o.nranks = 2;
  o.rank = 0;
  for (size_t i = 0; i < Runtime::kTableSize + 10; ++i) {
    auto* c = reinterpret_cast<ncclComm_t>(uintptr_t{0x100000} + i * 0x40);
    if (f.rt->OnCommCreated(c, o) != nullptr) comms.push_back(c);
  }
  EXPECT_EQ(comms.size(), Runtime::kTableSize);  // the rest pass untracked
  for (ncclComm_t c : comms) ASSERT_NE(f.rt->Find(c), nullptr);
  // Free every other one; their slots are reused, the others stay findable.
  for (size_t i = 0; i < comms.size(); i += 2) f.rt->OnCommDestroyed(comms[i], "destroyed");
  for (size_t i = 0; i < comms.size(); ++i) {
    EXPECT_EQ(f.rt->Find(comms[i]) != nullptr, i % 2 == 1) << i;
  }
  size_t added = 0;
  for (size_t i = 0; i < 100; ++i) {
    auto* c = reinterpret_cast<ncclComm_t>(uintptr_t{0x900000} + i * 0x40);
    if (f.rt->OnCommCreated(c, o) != nullptr && f.rt->Find(c) != nullptr) ++added;
  }
  EXPECT_EQ(added, 100u);
  EXPECT_EQ(f.rt->Find(reinterpret_cast<ncclComm_t>(uintptr_t{0x12345})), nullptr);
}

}  // namespace
}  // namespace metronome::shim
