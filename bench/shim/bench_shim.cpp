// Added cost per collective call: the exact code of the exported wrappers (intercept.hpp: the
// all-reduce's ElementwiseCollective, and Collective, which all-gather, send and the rest use)
// around a trivial "real" function, against calling that function directly through a pointer (what
// an application's call into libnccl is). No LD_PRELOAD needed: the wrapper templates are the same
// ones exports.cpp instantiates; an interposed call adds only the PLT hop (~0.2 ns).
#include <benchmark/benchmark.h>

#include "intercept.hpp"
#include "metronome/common/clock.hpp"

namespace ms = metronome::shim;

namespace {

__attribute__((noinline)) ncclResult_t FakeAllReduce(const void* s, void* r, size_t n,
                                                     ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                                     cudaStream_t) {
  benchmark::DoNotOptimize(s);
  benchmark::DoNotOptimize(r);
  benchmark::DoNotOptimize(n);
  return ncclSuccess;
}

float g_buf[256];

ms::Runtime* MakeRuntime(ms::Mode mode) {
  ms::Config c;
  c.mode = mode;
  c.gate = ms::GateKind::kHost;
  c.scheduler = "tcp://127.0.0.1:1";
  c.log_level = ms::LogLevel::kError;
  auto* rt = new ms::Runtime(c);  // leaked: the background thread lives on
  ms::Runtime::InstallForTesting(rt);
  ms::OverrideReal(ms::Fn::kAllReduce, reinterpret_cast<void*>(&FakeAllReduce));
  return rt;
}

ncclComm_t Register(ms::Runtime* rt) {
  static uintptr_t next = 0x5000;
  auto* comm = reinterpret_cast<ncclComm_t>(next += 0x40);
  ms::CommOrigin o;
  o.how = "bench";
  o.nranks = 2;
  o.rank = 0;
  rt->OnCommCreated(comm, o);
  return comm;
}

// ncclAllReduce's body (exports.cpp).
ncclResult_t Call(ncclComm_t comm) {
  const void* send = g_buf;
  void* recv = g_buf;
  auto* stream = static_cast<cudaStream_t>(nullptr);
  return ms::ElementwiseCollective(
      ms::Op::kAllReduce, size_t{256}, ncclFloat, comm, stream, [&](size_t off, size_t n) {
        return ms::Forward<ms::Fn::kAllReduce>(ms::ElementsInto(send, off, ncclFloat),
                                               ms::ElementsInto(recv, off, ncclFloat), n, ncclFloat,
                                               ncclSum, comm, stream);
      });
}

// The same call through Collective, the body of the wrappers that never split a call.
ncclResult_t CallWhole(ncclComm_t comm) {
  return ms::Collective<ms::Fn::kAllReduce>(ms::Op::kAllReduce, sizeof(g_buf), comm, nullptr, g_buf,
                                            g_buf, size_t{256}, ncclFloat, ncclSum, comm,
                                            static_cast<cudaStream_t>(nullptr));
}

void BmDirectCall(benchmark::State& state) {
  auto* volatile fn = &FakeAllReduce;
  auto* comm = reinterpret_cast<ncclComm_t>(uintptr_t{0x4000});
  for (auto _ : state) {
    benchmark::DoNotOptimize(fn(g_buf, g_buf, 256, ncclFloat, ncclSum, comm, nullptr));
  }
}
BENCHMARK(BmDirectCall);

void BmShimOff(benchmark::State& state) {
  ms::Runtime* rt = MakeRuntime(ms::Mode::kOff);
  ncclComm_t comm = Register(rt);
  for (auto _ : state) benchmark::DoNotOptimize(Call(comm));
}
BENCHMARK(BmShimOff);

// Enforce mode, a collective inside a burst (not a phase start): lookup, clock, ring push;
// through the all-reduce's body (Call) or through Collective (CallWhole: what
// ElementwiseCollective's parts bookkeeping costs).
template <ncclResult_t (*F)(ncclComm_t)>
void BmInBurst(benchmark::State& state) {
  ms::Runtime* rt = MakeRuntime(ms::Mode::kEnforce);
  ncclComm_t comm = Register(rt);
  ms::CommState* st = rt->Find(comm);
  st->gap_threshold_ns.store(INT64_MAX / 2);
  F(comm);
  for (auto _ : state) benchmark::DoNotOptimize(F(comm));
}
void BmShimEnforceInBurst(benchmark::State& state) {
  BmInBurst<Call>(state);
}
BENCHMARK(BmShimEnforceInBurst);
void BmShimEnforceInBurstWhole(benchmark::State& state) {
  BmInBurst<CallWhole>(state);
}
BENCHMARK(BmShimEnforceInBurstWhole);

// Enforce mode, every call a phase start inside an open window: + timetable read and DecideGate.
void BmShimEnforcePhaseStartOpenWindow(benchmark::State& state) {
  ms::Runtime* rt = MakeRuntime(ms::Mode::kEnforce);
  ncclComm_t comm = Register(rt);
  ms::CommState* st = rt->Find(comm);
  metronome::Timetable t{1, metronome::RealtimeNs(), 1'000'000'000, 0, 1'000'000'000, 0, 0};
  metronome::ValidateTimetable(t);
  st->job->store.Publish(t);  // window == period: always open
  rt->clock_valid.store(true);
  st->gap_threshold_ns.store(-1);  // every call starts a phase
  for (auto _ : state) benchmark::DoNotOptimize(Call(comm));
  state.counters["gated"] = static_cast<double>(st->gated.load());
}
BENCHMARK(BmShimEnforcePhaseStartOpenWindow);

// A communicator the shim does not know (created before it, or beyond its table).
void BmShimEnforceUnknownComm(benchmark::State& state) {
  MakeRuntime(ms::Mode::kEnforce);
  auto* comm = reinterpret_cast<ncclComm_t>(uintptr_t{0xdead000});
  for (auto _ : state) benchmark::DoNotOptimize(Call(comm));
}
BENCHMARK(BmShimEnforceUnknownComm);

}  // namespace

BENCHMARK_MAIN();
