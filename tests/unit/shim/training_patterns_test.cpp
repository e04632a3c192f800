// The phase tracker and the gating rule (rhythm.hpp) on the call sequences of today's training
// patterns, synthesized. The timings are derived from published model sizes and GPU rates, with
// the arithmetic beside each pattern (8 GPUs per job, 200 Gb/s per GPU, bf16 unless said):
//   DDP          ResNet-50 (25.6 M parameters, He et al. 2016) on A100 at NVIDIA's published
//                ~2,700 images/s/GPU (batch 256, AMP): 95 ms an iteration, 32 forward + 63
//                backward; fp32 gradients 102 MB in DDP's buckets (1 MiB first, then 25 MB; Li
//                et al., VLDB 2020), each all-reduce 25 MB·2·7/8 / 25 GB/s ≈ 1.8 ms.
//   FSDP/ZeRO-3  GPT-2 XL (1.5 B parameters, 48 layers: 31 M each, 62 MB in bf16) with 8×1024
//                tokens a step at 150 TFLOP/s: a layer's forward 2·31 M·8192 FLOP ≈ 3.4 ms,
//                backward 6.8 ms; all-gather of a layer (7/8 of 62 MB) ≈ 2.2 ms before each
//                layer's forward and backward, reduce-scatter ≈ 2.2 ms after each backward;
//                optimizer step 12 ms: ~500 ms an iteration, 144 collectives.
//   Pipeline     GPT-3 2.7 B in 4 stages, 1F1B with 8 micro-batches of 2×2048 tokens: a
//                stage's micro-batch forward ≈ 9 ms, backward ≈ 18 ms; activations sent and
//                gradients received per micro-batch (2·2048·2560·2 B ≈ 21 MB, ≈ 0.9 ms); a
//                3-micro-batch bubble; the data-parallel all-reduce of the stage's 1.35 GB of
//                gradients in 25 MB buckets at the end of the step: ~330 ms an iteration.
//   TP + DP      Megatron-style GPT 8.3 B, tensor parallel 8 within a node (NVLink), data parallel
//                across nodes: per layer 2 all-reduces forward and 2 backward of 2×2048×3072×2 B
//                ≈ 25 MB on NVLink (≈ 0.2 ms), 72 layers at ≈ 2 ms (forward) and 4 ms (backward)
//                each; the data-parallel communicator all-reduces the 2 GB of gradients at the end
//                of backward: ~450 ms an iteration, 288 tensor-parallel calls.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "metronome/common/clock.hpp"
#include "phase_tracker.hpp"
#include "rhythm.hpp"

namespace metronome::shim {
namespace {

constexpr uint32_t kAllReduce = 1;
constexpr uint32_t kAllGather = 4;
constexpr uint32_t kReduceScatter = 5;
constexpr uint32_t kSend = 9;
constexpr uint32_t kRecv = 10;

// Issues collectives on a simulated clock, with ±1 % jitter on every compute span.
class Sequence {
 public:
  explicit Sequence(uint32_t seed) : rng_(seed) {}
  void Compute(int64_t ns) {
    std::normal_distribution<double> j(1.0, 0.01);
    now_ += static_cast<int64_t>(static_cast<double>(ns) * std::max(0.9, j(rng_)));
  }
  // A call that returns after `ns` (the host-side span NCCL takes).
  void Call(std::vector<CollEvent>& out, uint32_t op, uint64_t bytes, int64_t ns) {
    out.push_back(CollEvent{now_, now_ + ns, op, bytes, 0});
    now_ += ns;
  }
  int64_t Now() const { return now_; }

 private:
  std::mt19937 rng_;
  int64_t now_ = 1'000'000'000;
};

struct Pattern {
  std::vector<CollEvent> main;   // the communicator that carries the iteration's rhythm
  std::vector<CollEvent> other;  // a second communicator of the job (none: empty)
  int64_t iteration_ns = 0;      // the natural iteration, for the checks
};

Pattern Ddp(int iterations) {
  Pattern p;
  Sequence s(1);
  const int64_t start = s.Now();
  for (int i = 0; i < iterations; ++i) {
    s.Compute(32 * kMs);  // forward
    // Backward releases the buckets as it goes: 1 MiB first, then 4 × 25 MB.
    s.Compute(12 * kMs);
    s.Call(p.main, kAllReduce, 1 << 20, 200 * kUs);
    for (int b = 0; b < 4; ++b) {
      s.Compute(12 * kMs);
      s.Call(p.main, kAllReduce, 25'000'000, 1800 * kUs);
    }
    s.Compute(2 * kMs);  // optimizer
  }
  p.iteration_ns = (s.Now() - start) / iterations;
  return p;
}

Pattern Fsdp(int iterations, int layers = 48) {
  Pattern p;
  Sequence s(2);
  const int64_t start = s.Now();
  constexpr uint64_t kLayer = 54'000'000;
  for (int i = 0; i < iterations; ++i) {
    for (int l = 0; l < layers; ++l) {  // forward: gather a layer, run it (the next overlaps)
      s.Call(p.main, kAllGather, kLayer, 60 * kUs);
      s.Compute(3400 * kUs);
    }
    for (int l = 0; l < layers; ++l) {  // backward: gather, run, reduce-scatter its gradients
      s.Call(p.main, kAllGather, kLayer, 60 * kUs);
      s.Compute(6800 * kUs);
      s.Call(p.main, kReduceScatter, kLayer, 60 * kUs);
    }
    s.Compute(12 * kMs);  // optimizer
  }
  p.iteration_ns = (s.Now() - start) / iterations;
  return p;
}

Pattern Pipeline(int iterations) {
  Pattern p;
  Sequence s(3);
  const int64_t start = s.Now();
  constexpr uint64_t kAct = 21'000'000;
  for (int i = 0; i < iterations; ++i) {
    // 1F1B on the first stage: 3 warm-up forwards, 5 forward+backward pairs, 3 backwards.
    for (int m = 0; m < 3; ++m) {
      s.Compute(9 * kMs);
      s.Call(p.other, kSend, kAct, 900 * kUs);
    }
    for (int m = 0; m < 5; ++m) {
      s.Compute(9 * kMs);
      s.Call(p.other, kSend, kAct, 900 * kUs);
      s.Call(p.other, kRecv, kAct, 900 * kUs);
      s.Compute(18 * kMs);
    }
    for (int m = 0; m < 3; ++m) {
      s.Call(p.other, kRecv, kAct, 900 * kUs);
      s.Compute(18 * kMs);
    }
    // The data-parallel gradients of the stage, in buckets at the end of the step.
    for (int b = 0; b < 54; ++b) s.Call(p.main, kAllReduce, 25'000'000, 1800 * kUs);
    s.Compute(6 * kMs);  // optimizer
  }
  p.iteration_ns = (s.Now() - start) / iterations;
  return p;
}

Pattern TensorAndData(int iterations) {
  Pattern p;
  Sequence s(4);
  const int64_t start = s.Now();
  for (int i = 0; i < iterations; ++i) {
    for (int l = 0; l < 72; ++l) {  // forward: two tensor-parallel all-reduces per layer
      s.Compute(1 * kMs);
      s.Call(p.other, kAllReduce, 25'000'000, 200 * kUs);
      s.Compute(1 * kMs);
      s.Call(p.other, kAllReduce, 25'000'000, 200 * kUs);
    }
    for (int l = 0; l < 72; ++l) {  // backward: two more
      s.Compute(2 * kMs);
      s.Call(p.other, kAllReduce, 25'000'000, 200 * kUs);
      s.Compute(2 * kMs);
      s.Call(p.other, kAllReduce, 25'000'000, 200 * kUs);
    }
    for (int b = 0; b < 80; ++b) s.Call(p.main, kAllReduce, 25'000'000, 1800 * kUs);
    s.Compute(5 * kMs);
  }
  p.iteration_ns = (s.Now() - start) / iterations;
  return p;
}

PhaseEstimate Track(const std::vector<CollEvent>& events) {
  PhaseTracker t;
  for (const CollEvent& e : events) t.Add(e);
  return t.Estimate();
}

void Print(const char* name, const char* comm, const PhaseEstimate& e, int64_t iteration_ns) {
  std::printf(
      "%-12s %-14s iteration %6.1f ms: period %6.1f ms, confidence %.2f, regularity "
      "%.2f, %u calls a phase, gate: %s\n",
      name, comm, static_cast<double>(iteration_ns) / 1e6, static_cast<double>(e.period_ns) / 1e6,
      e.confidence, e.regularity, e.ops, MayGate(e) ? "yes" : "no (observed)");
}

void ExpectIterationRhythm(const char* name, const PhaseEstimate& e, int64_t iteration_ns) {
  EXPECT_NEAR(static_cast<double>(e.period_ns), static_cast<double>(iteration_ns),
              0.03 * static_cast<double>(iteration_ns))
      << name;
  EXPECT_TRUE(MayGate(e)) << name;
}

TEST(TrainingPatterns, DdpBucketsAreOnePhaseAnIteration) {
  const Pattern p = Ddp(40);
  const PhaseEstimate e = Track(p.main);
  Print("DDP", "data-parallel", e, p.iteration_ns);
  ExpectIterationRhythm("DDP", e, p.iteration_ns);
  EXPECT_EQ(e.ops, 5u);
}

TEST(TrainingPatterns, FsdpLayersHaveNoStableRhythmAndAreObserved) {
  // The tracker splits the iteration at every layer (the per-layer compute gaps dwarf the
  // collectives), and forward and backward layers alternate in kind: no one period holds, and
  // the communicator is observed, never held. (Finding the 500 ms iteration behind the layers
  // would let it be gated: not done.)
  for (const int layers : {48, 96}) {  // GPT-2 XL; a GPT-3-sized stack
    const Pattern p = Fsdp(12, layers);
    const PhaseEstimate e = Track(p.main);
    Print(layers == 48 ? "FSDP 48" : "FSDP 96", "sharded", e, p.iteration_ns);
    EXPECT_FALSE(MayGate(e)) << layers << " layers";
  }
}

TEST(TrainingPatterns, PipelineGatesTheDataParallelCommunicatorOnly) {
  const Pattern p = Pipeline(30);
  const PhaseEstimate dp = Track(p.main);
  const PhaseEstimate pp = Track(p.other);
  Print("pipeline", "data-parallel", dp, p.iteration_ns);
  Print("pipeline", "stage p2p", pp, p.iteration_ns);
  ExpectIterationRhythm("pipeline data-parallel", dp, p.iteration_ns);
  // The job's rhythm is the data-parallel communicator's; the stage's sends and receives are
  // on the critical path of every micro-batch and are never held.
  const PhaseEstimate* comms[] = {&pp, &dp};
  EXPECT_EQ(RhythmComm(comms, 2), 1);
}

TEST(TrainingPatterns, TensorParallelTrafficIsObservedAndDataParallelGated) {
  const Pattern p = TensorAndData(30);
  const PhaseEstimate dp = Track(p.main);
  const PhaseEstimate tp = Track(p.other);
  Print("TP+DP", "data-parallel", dp, p.iteration_ns);
  Print("TP+DP", "tensor-par.", tp, p.iteration_ns);
  ExpectIterationRhythm("TP+DP data-parallel", dp, p.iteration_ns);
  const PhaseEstimate* comms[] = {&tp, &dp};
  EXPECT_EQ(RhythmComm(comms, 2), 1) << "the tensor-parallel communicator moves more bytes, but "
                                        "the iteration's rhythm is the data-parallel one's";
}

// The choice sticks: a communicator RhythmComm prefers for a few phases (as a split one does
// while the parent's holds reach its period first) does not take the gate; one preferred through
// kSwitchAfterPhases of its phases does, and a communicator that is gone is replaced at once.
TEST(TrainingPatterns, TheRhythmChoiceSwitchesOnlyOnAPreferenceThatLasts) {
  const Pattern p = TensorAndData(30);
  PhaseEstimate dp = Track(p.main);
  PhaseEstimate tp = Track(p.other);
  const int dp_id = 0;
  const int tp_id = 0;
  const void* ids[] = {&tp_id, &dp_id};
  const PhaseEstimate* comms[] = {&tp, &dp};
  RhythmChoice choice;
  ASSERT_EQ(ChooseRhythm(choice, comms, ids, 2), &dp_id);
  // The tensor-parallel communicator now looks like the iteration's (stable, a longer period).
  tp.period_ns = dp.period_ns * 2;
  tp.regularity = 1.0;
  tp.phases = std::max(tp.phases, kJudgeAfterPhases);
  for (uint64_t k = 0; k < kSwitchAfterPhases; ++k) {
    EXPECT_EQ(ChooseRhythm(choice, comms, ids, 2), &dp_id) << "after " << k << " phases";
    ++tp.phases;
  }
  EXPECT_EQ(ChooseRhythm(choice, comms, ids, 2), &tp_id) << "a lasting preference";
  // A brief preference back is not enough either way.
  tp.period_ns = dp.period_ns;
  EXPECT_EQ(ChooseRhythm(choice, comms, ids, 2), &tp_id);
  // The current one is gone: the other takes over at once.
  const PhaseEstimate* only[] = {&dp};
  const void* only_ids[] = {&dp_id};
  EXPECT_EQ(ChooseRhythm(choice, only, only_ids, 1), &dp_id);
}

TEST(TrainingPatterns, NoStableRhythmIsObservedNeverGated) {
  // Collectives at random intervals (an evaluation loop, a parameter server's pulls).
  Sequence s(5);
  std::mt19937 rng(6);
  std::exponential_distribution<double> gap(1.0 / 40e6);
  std::vector<CollEvent> events;
  for (int i = 0; i < 200; ++i) {
    s.Compute(static_cast<int64_t>(gap(rng)));
    s.Call(events, kAllReduce, 4 << 20, 300 * kUs);
  }
  const PhaseEstimate e = Track(events);
  Print("random", "any", e, 0);
  EXPECT_FALSE(MayGate(e));
}

TEST(TrainingPatterns, AFreshCommunicatorFollowsItsTimetable) {
  // Too few phases to judge: the scheduler's timetable (made from the job's reports) decides.
  std::vector<CollEvent> events;
  Sequence s(7);
  for (int i = 0; i < 3; ++i) {
    s.Compute(50 * kMs);
    s.Call(events, kAllReduce, 1 << 20, 100 * kUs);
  }
  EXPECT_TRUE(MayGate(Track(events)));
  EXPECT_TRUE(MayGate(PhaseEstimate{}));
}

}  // namespace
}  // namespace metronome::shim
