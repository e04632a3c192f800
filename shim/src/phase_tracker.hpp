// PhaseTracker: learns a communicator's rhythm from the collectives it issues, with no user input.
//
// Fed with one CollEvent per collective (host time it was called, host time it returned, the
// operation and its size), it finds
//   - the start of each communication phase: the first collective after a gap longer than the
//     gaps inside a phase. The threshold separating the two kinds of gaps is learned: the recent
//     gaps are sorted and split at their largest ratio jump (a phase's collectives follow each
//     other closely, phases are separated by the compute of an iteration);
//   - the phase's signature: the (op, bytes) of its first collective. Once the last phases agree
//     on it, a gap that is only moderately long before a collective that does not match the
//     signature (a DDP bucket waiting for backward compute) does not start a phase: the phase
//     start is the repeat of the iteration's sequence;
//   - the iteration period: the median of the last intervals between phase starts (robust to an
//     occasional slow iteration, and it follows a change of rhythm after a few iterations);
//   - the phase duration, bytes and collectives per phase.
// It is a pure class (no clock, no threads, no allocation after construction): the shim's
// background thread feeds it from the per-communicator event ring.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace metronome::shim {

struct CollEvent {
  int64_t start_ns = 0;  // when the collective was called (host clock)
  int64_t end_ns = 0;    // when the call returned
  uint32_t op = 0;       // operation (Op in runtime.hpp), any small integer
  uint64_t bytes = 0;    // message size
  int64_t hold_ns = 0;   // how long the gate held the call before start_ns (0: not held)
};

struct PhaseEstimate {
  uint64_t phases = 0;            // phase starts seen
  uint64_t events = 0;            // collectives seen
  int64_t last_start_ns = 0;      // start of the latest phase
  int64_t period_ns = 0;          // 0 = not yet known
  int64_t natural_period_ns = 0;  // the period without the gate's holds (median, 0 = unknown)
  // σ of the compute between phases (a phase's end → the next one's arrival at the gate), robust:
  // 1.4826·MAD over kJitterWindow phases; 0 = unknown. Communication time is left out: measured
  // ungated it varies with the contention the scheduler is about to remove.
  int64_t jitter_ns = 0;
  int64_t compute_ns = 0;     // median of that compute (0 = unknown)
  int64_t next_start_ns = 0;  // predicted start of the next phase (0 = unknown)
  int64_t comm_ns = 0;        // median duration of a phase, the gate's pauses inside it left out
  uint64_t bytes = 0;         // bytes moved in the last complete phase
  uint32_t ops = 0;           // collectives in the last complete phase
  double confidence = 0.0;    // 0..1: how regular the recent periods, or the computes, are
  // 0..1: the share of the last (up to 256) computes between phases (a phase's end to the next
  // one's arrival: neither the gate's holds nor the contention of the wire count) within ±10 %
  // of their median. Low when phases of several kinds alternate (FSDP's forward and backward
  // layers) although the last few intervals agree.
  double regularity = 0.0;
  int64_t gap_threshold_ns = 0;  // a gap above this starts a phase
  uint64_t first_key = 0;        // signature of a phase's first collective (0 = not settled)
  int64_t merge_below_ns = 0;    // with first_key: a gap below this before another collective
                                 // does not start a phase (0 = rule not in force)
};

class PhaseTracker {
 public:
  static constexpr size_t kGapHistory = 128;
  static constexpr size_t kStartHistory = 256;
  static constexpr size_t kPeriodWindow = 5;
  static constexpr size_t kDurationWindow = 8;
  static constexpr size_t kJitterWindow = 32;
  static constexpr int64_t kMinGapNs = 2'000;  // gaps below are noise
  // A gap this many times every remembered gap is a pause (a checkpoint, an evaluation) until a
  // second one like it comes within kGapHistory gaps: it starts a phase but does not teach the
  // threshold, where one such gap, far above all others, would become the split and merge every
  // remembered iteration into one phase.
  static constexpr int64_t kPauseFactor = 4;

  explicit PhaseTracker(int64_t default_gap_threshold_ns = 1'000'000);

  // Adds one collective (in call order). Returns true when it starts a communication phase.
  bool Add(const CollEvent& e);

  PhaseEstimate Estimate() const;

  // Copies up to `max` recent phase starts, oldest first; returns how many.
  size_t RecentStarts(int64_t* out, size_t max) const;

  static uint64_t Key(uint32_t op, uint64_t bytes) {
    return (static_cast<uint64_t>(op & 0xffu) << 56) ^ (bytes & 0x00ff'ffff'ffff'ffffULL) ^
           0x5bd1'e995'0000'0000ULL;
  }

  static uint64_t KeyBytes(uint64_t key) {
    return (key ^ 0x5bd1'e995'0000'0000ULL) & 0x00ff'ffff'ffff'ffffULL;
  }

  void Reset();

 private:
  // The last N values pushed, oldest first.
  template <class T, size_t N>
  class History {
   public:
    void Push(const T& v) {
      values_[next_] = v;
      next_ = (next_ + 1) % N;
      if (count_ < N) ++count_;
    }
    void Clear() { count_ = next_ = 0; }
    size_t Size() const { return count_; }
    const T& operator[](size_t i) const { return values_[(next_ + N - count_ + i) % N]; }
    const T& Back() const { return (*this)[count_ - 1]; }
    // The last k values (newest last) into `out`; returns how many.
    size_t Last(size_t k, T* out) const {
      const size_t n = k < count_ ? k : count_;
      for (size_t i = 0; i < n; ++i) out[i] = (*this)[count_ - n + i];
      return n;
    }

   private:
    std::array<T, N> values_{};
    size_t count_ = 0;
    size_t next_ = 0;
  };

  struct Past {
    int64_t start;
    int64_t end;
    uint64_t key;
    int64_t hold;
  };
  static constexpr size_t kEventHistory = 256;

  // Phase bookkeeping for one event; `gap` < 0 for the very first one.
  bool Segment(const Past& e, int64_t gap);
  // The threshold moved a lot: segment the remembered events again with the new one.
  void Resegment();
  void UpdateThreshold();
  void ClosePhase();
  int64_t MedianInterval(double* spread) const;
  int64_t MedianNaturalInterval() const;
  double Regularity() const;
  // Median and robust σ of the compute between phases (0, 0 while fewer than 4 were seen).
  void ComputeStats(int64_t* median, int64_t* sigma) const;
  int64_t MergeBelow() const;
  // Into the gap history, unless it is a pause (kPauseFactor).
  void LearnGap(int64_t gap);
  // Into gaps_ and, in order, sorted_gaps_ (the oldest leaves both when full).
  void PushGap(int64_t gap);

  int64_t default_threshold_;
  int64_t threshold_;
  int64_t segmented_with_;  // threshold the current phase history was built with

  History<Past, kEventHistory> past_;
  uint64_t events_ = 0;
  uint64_t phases_ = 0;
  int64_t last_end_ = 0;

  History<int64_t, kGapHistory> gaps_;
  // gaps_ in ascending order, kept so by each push (UpdateThreshold reads it for every event).
  std::array<int64_t, kGapHistory> sorted_gaps_{};
  int64_t set_aside_ = 0;  // the latest pause, learned if another like it follows soon
  size_t set_aside_age_ = 0;
  History<int64_t, kStartHistory> starts_;
  // In step with starts_: when each phase's first call arrived, before the gate held it.
  History<int64_t, kStartHistory> arrivals_;
  // From each phase's end to the next phase's arrival: the compute between them.
  History<int64_t, kStartHistory> compute_gaps_;
  History<int64_t, kDurationWindow> durations_;
  History<int64_t, kDurationWindow> boundary_gaps_;
  History<uint64_t, 3> first_keys_;  // first keys of the last closed phases
  uint64_t first_key_ = 0;

  // The phase in progress.
  int64_t cur_start_ = 0;
  int64_t cur_end_ = 0;
  uint64_t cur_bytes_ = 0;
  uint32_t cur_ops_ = 0;
  int64_t cur_paused_ = 0;  // the gate's holds of its later collectives
  uint64_t cur_first_key_ = 0;
  // The last closed phase.
  uint64_t last_bytes_ = 0;
  uint32_t last_ops_ = 0;
};

}  // namespace metronome::shim
