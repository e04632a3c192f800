// Costs of the shared core: encode/decode of each protocol message, the gate decision, and the
// clock filter. Run: build/release/bench/common/bench_common
#include <benchmark/benchmark.h>

#include "metronome/common/clock_sync.hpp"
#include "metronome/common/protocol.hpp"
#include "metronome/common/timetable.hpp"
#include "metronome/common/turn.hpp"
#include "metronome/common/yield.hpp"

namespace metronome {
namespace {

proto::Message Sample(proto::MessageType t) {
  using namespace proto;
  switch (t) {
    case MessageType::kHello:
      // As a shim in a Kubernetes pod sends it (with its pod from the downward API).
      return Hello{"resnet50-job-17",
                   "gpu-node-031",
                   5,
                   16,
                   2,
                   31337,
                   22809,
                   "0.1.0",
                   "team-vision",
                   "resnet50-job-17-worker-5",
                   "0d3c5a2e-7f1b-4c4e-9a51-3f0e6d2b8c11"};
    case MessageType::kWelcome:
      return Welcome{42, 1000, 1'700'000'000'000'000'000};
    case MessageType::kClockPing:
      return ClockPing{9, 1'700'000'000'000'000'000};
    case MessageType::kClockPong:
      return ClockPong{9, 1'700'000'000'000'000'000, 1'700'000'000'000'050'000,
                       1'700'000'000'000'060'000};
    case MessageType::kProfileReport: {
      ProfileReport r;
      r.job_id = "resnet50-job-17";
      r.rank = 5;
      r.iterations = 100'000;
      r.period_ns = 180'000'000;
      r.comm_ns = 40'000'000;
      r.bytes_per_phase = 102'400'000;
      r.collectives_per_phase = 5;
      r.confidence = 0.98;
      r.clock_offset_ns = 1234;
      r.clock_error_ns = 50'000;
      r.timetable_version = 12;
      for (int i = 0; i < 8; ++i) r.phase_starts_ns.push_back(1'700'000'000'000'000'000 + i);
      return r;
    }
    case MessageType::kTimetablePush: {
      TimetablePush p{"resnet50-job-17",
                      {12, 1'700'000'000'000'000'000, 180'000'000, 3'000'000, 40'000'000, 5'000'000,
                       180'000'000},
                      {}};
      // Four higher-ranked windows to yield to, as a crowded link gives.
      p.yields.epoch_ns = p.timetable.epoch_ns;
      p.yields.need_ns = 40'000'000;
      p.yields.max_wait_ns = 180'000'000;
      p.yields.tolerance_ns = 3'000'000;
      for (int64_t i = 0; i < 4; ++i) {
        p.yields.windows[p.yields.count++] = {280'000'000 + i * 13'000'000, i * 7'000'000,
                                              80'000'000};
      }
      return p;
    }
    case MessageType::kBye:
      return Bye{"resnet50-job-17", 5, "exit"};
    case MessageType::kError:
      return Error{ErrorCode::kUnexpected, "report before hello"};
    case MessageType::kPhaseEdge:
      return PhaseEdge{"resnet50-job-17", 5, true, 1'700'000'000'000'000'000};
    case MessageType::kTurnPush: {
      TurnPush p{"resnet50-job-17", 3, true, {}};
      p.turns = {40'000'000, 180'000'000, 2, {}};
      p.turns.partners[0] = {8, false, 60'000'000, 120'000'000, 0, 0};
      p.turns.partners[1] = {11, true, 30'000'000, 200'000'000, 0, 0};
      return p;
    }
    case MessageType::kTurnEdge:
      return TurnEdge{"resnet50-job-17", 8, false, 1'700'000'000'000'000'000};
  }
  return Bye{};
}

void BmEncode(benchmark::State& state) {
  const auto type = static_cast<proto::MessageType>(state.range(0));
  const proto::Message m = Sample(type);
  std::string out;
  out.reserve(1024);
  for (auto _ : state) {
    proto::Encode(m, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(proto::TypeName(type)) + " " + std::to_string(out.size()) + " B");
}
BENCHMARK(BmEncode)->DenseRange(1, 11);

void BmDecode(benchmark::State& state) {
  const auto type = static_cast<proto::MessageType>(state.range(0));
  const std::string bytes = proto::Encode(Sample(type));
  for (auto _ : state) {
    proto::Decoded d = proto::Decode(bytes);
    benchmark::DoNotOptimize(d);
    if (!d.Ok()) state.SkipWithError("decode failed");
  }
  state.SetLabel(std::string(proto::TypeName(type)));
}
BENCHMARK(BmDecode)->DenseRange(1, 11);

// The turn decision at a phase start with four partners, two of them seen in a phase (equal and
// higher), as the gate asks it when its timetable lets a phase go.
void BmTurnDecision(benchmark::State& state) {
  constexpr int64_t kT0 = 1'700'000'000'000'000'000;
  TurnSet s{40'000'000, 180'000'000, 4, {}};
  s.partners[0] = {1, false, 60'000'000, 120'000'000, kT0 - 30'000'000, kT0 - 200'000'000};
  s.partners[1] = {2, true, 30'000'000, 200'000'000, kT0 - 80'000'000, kT0 - 50'000'000};
  s.partners[2] = {3, true, 50'000'000, 90'000'000, kT0 - 10'000'000, kT0 - 90'000'000};
  s.partners[3] = {4, false, 70'000'000, 150'000'000, kT0 - 300'000'000, kT0 - 100'000'000};
  if (ValidateTurnSet(s) != kTurnOk) state.SkipWithError("invalid set");
  int64_t now = kT0;
  uint32_t in_a_row = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(now);
    TurnDecision d = DecideTurn(s, now, now, kDefaultMaxWaitCapNs, in_a_row);
    benchmark::DoNotOptimize(d);
    now += 7'919;
    in_a_row = (in_a_row + 1) & 3u;
  }
}
BENCHMARK(BmTurnDecision);

void BmGateDecision(benchmark::State& state) {
  Timetable tt{3,          1'700'000'000'000'000'000, 180'000'000, 3'000'000, 40'000'000, 5'000'000,
               180'000'000};
  ValidateTimetable(tt);
  int64_t now = 1'700'000'123'456'789'000;
  for (auto _ : state) {
    benchmark::DoNotOptimize(now);
    GateDecision d = DecideGate(tt, now);
    benchmark::DoNotOptimize(d);
    now += 7'919;  // walk through all phases of the period
  }
}
BENCHMARK(BmGateDecision);

// The ranked gate with state.range(0) higher-ranked windows of unrelated periods (duty 1/32
// each: with 16 of them half the time is someone's window, and most arrivals move past one),
// as the host gate decides: through the communicator's cursor (YieldCursor), arrivals in time
// order, each the first collective of a phase of 20 ms that may end 1 ms into a window when
// state.range(1) is 1 (the allowance: a decision that would wait also asks AllowedToFinish; 0:
// none, as before allowances, for the ratio in one run).
// BmRankedGateDecisionFromScratch: the same decisions without a cursor (the device kernel's and
// the simulator's way).
void RankedGateDecision(benchmark::State& state, bool cursor) {
  const Timetable tt{3, 1'700'000'000'000'000'000, 180'000'000, 0, 180'000'000, 0, 0};
  YieldSet y;
  y.epoch_ns = tt.epoch_ns;
  y.need_ns = 20'000'000;
  y.max_wait_ns = 180'000'000;
  y.allowance_ns = state.range(1) != 0 ? 1'000'000 : 0;
  y.count = static_cast<uint32_t>(state.range(0));
  for (uint32_t i = 0; i < y.count; ++i) {
    const int64_t period = 150'000'000 + 17'321'113 * i;
    y.windows[i] = {period, 7'654'321 * static_cast<int64_t>(i), period / 32};
  }
  ValidateYieldSet(y);
  int64_t now = 1'700'000'123'456'789'000;
  YieldCursor c;
  FollowSet(c, tt.version);
  for (auto _ : state) {
    benchmark::DoNotOptimize(now);
    GateDecision d = DecideRankedGate(tt, y, now, kDefaultMaxWaitCapNs, false, y.need_ns,
                                      cursor ? &c : nullptr, y.need_ns);
    benchmark::DoNotOptimize(d);
    now += 7'919'011;  // arrivals spread over the windows' phases
  }
}
void BmRankedGateDecision(benchmark::State& state) {
  RankedGateDecision(state, true);
}
void BmRankedGateDecisionFromScratch(benchmark::State& state) {
  RankedGateDecision(state, false);
}
BENCHMARK(BmRankedGateDecision)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({4, 1})
    ->Args({16, 1})
    ->Args({16, 0});
BENCHMARK(BmRankedGateDecisionFromScratch)->Args({16, 1})->Args({16, 0});

void BmValidateTimetable(benchmark::State& state) {
  const Timetable raw{3,        1'700'000'000'000'000'000, 180'000'000, -3'000'000, 400'000'000, -1,
                      INT64_MAX};
  for (auto _ : state) {
    Timetable t = raw;
    benchmark::DoNotOptimize(ValidateTimetable(t));
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BmValidateTimetable);

void BmClockSyncAddSample(benchmark::State& state) {
  ClockSync c(16);
  int64_t t = 0;
  for (auto _ : state) {
    c.AddSample({t, t + 50'000, t + 55'000, t + 100'000 + (t % 7'000)});
    t += 1'000'000;
    benchmark::DoNotOptimize(c.OffsetNs());
  }
}
BENCHMARK(BmClockSyncAddSample);

}  // namespace
}  // namespace metronome

BENCHMARK_MAIN();
