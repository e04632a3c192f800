// TimetableStore: the timetable in force for one job and the higher-ranked windows it yields to,
// written by the background thread and read by the gate on the caller's path without a lock (a
// sequence lock: the writer makes the sequence odd while it writes; a reader retries when it saw
// an odd or changed sequence). A new version replaces the old one atomically as far as any
// reader can tell, the yields with it.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>

#include "metronome/common/timetable.hpp"
#include "metronome/common/yield.hpp"

namespace metronome::shim {

class TimetableStore {
 public:
  // Single writer. `yields` must have passed ValidateYieldSet (its inverse periods are filled).
  void Publish(const Timetable& t, const YieldSet& yields = {}) noexcept {
    const uint32_t s = seq_.load(std::memory_order_relaxed);
    seq_.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    f_[0].store(static_cast<int64_t>(t.version), std::memory_order_relaxed);
    f_[1].store(t.epoch_ns, std::memory_order_relaxed);
    f_[2].store(t.period_ns, std::memory_order_relaxed);
    f_[3].store(t.offset_ns, std::memory_order_relaxed);
    f_[4].store(t.window_ns, std::memory_order_relaxed);
    f_[5].store(t.late_slack_ns, std::memory_order_relaxed);
    f_[6].store(t.max_wait_ns, std::memory_order_relaxed);
    const uint32_t n = yields.count < kMaxYieldWindows ? yields.count : kMaxYieldWindows;
    y_[0].store(yields.epoch_ns, std::memory_order_relaxed);
    y_[1].store(yields.need_ns, std::memory_order_relaxed);
    y_[2].store(yields.max_wait_ns, std::memory_order_relaxed);
    y_[3].store(yields.tolerance_ns, std::memory_order_relaxed);
    y_[4].store(yields.allowance_ns, std::memory_order_relaxed);
    y_[kYieldCount].store(n, std::memory_order_relaxed);
    for (uint32_t i = 0; i < n; ++i) {
      const YieldWindow& w = yields.windows[i];
      std::atomic<int64_t>* f = &y_[kYieldHeader + kWindowFields * i];
      f[0].store(w.period_ns, std::memory_order_relaxed);
      f[1].store(w.offset_ns, std::memory_order_relaxed);
      f[2].store(w.window_ns, std::memory_order_relaxed);
      f[3].store(std::bit_cast<int64_t>(w.inv_period), std::memory_order_relaxed);
    }
    valid_.store(1, std::memory_order_relaxed);
    seq_.store(s + 2, std::memory_order_release);
  }

  // Single writer: no timetable (the gate lets everything through).
  void Clear() noexcept {
    const uint32_t s = seq_.load(std::memory_order_relaxed);
    seq_.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    valid_.store(0, std::memory_order_relaxed);
    y_[kYieldCount].store(0, std::memory_order_relaxed);
    seq_.store(s + 2, std::memory_order_release);
  }

  // Any number of readers. False when there is no timetable, or when a writer kept it busy for
  // all the retries (then the caller goes ungated, which is always safe).
  bool Read(Timetable& out) const noexcept { return ReadInto(out, nullptr, nullptr); }

  // The timetable and its yields, read together (count 0: none). `publication`: which write
  // they came from (different for every Publish and Clear, until 2^31 of them): what a gate's
  // YieldCursor follows, as a new scheduler may number its timetables from 1 again.
  bool Read(Timetable& out, YieldSet& yields, uint64_t* publication = nullptr) const noexcept {
    return ReadInto(out, &yields, publication);
  }

  // Whether the last published timetable came with windows to yield to: one relaxed load, for
  // the caller's path to skip the yields (and their 600 bytes) when there are none. A stale
  // answer costs one read or one missed yield, never a wrong hold.
  bool MayYield() const noexcept { return y_[kYieldCount].load(std::memory_order_relaxed) != 0; }

  uint64_t Version() const noexcept {
    Timetable t;
    return Read(t) ? t.version : 0;
  }

 private:
  bool ReadInto(Timetable& out, YieldSet* yields, uint64_t* publication) const noexcept {
    for (int attempt = 0; attempt < 16; ++attempt) {
      const uint32_t s1 = seq_.load(std::memory_order_acquire);
      if (s1 & 1u) continue;
      const int valid = valid_.load(std::memory_order_relaxed);
      out.version = static_cast<uint64_t>(f_[0].load(std::memory_order_relaxed));
      out.epoch_ns = f_[1].load(std::memory_order_relaxed);
      out.period_ns = f_[2].load(std::memory_order_relaxed);
      out.offset_ns = f_[3].load(std::memory_order_relaxed);
      out.window_ns = f_[4].load(std::memory_order_relaxed);
      out.late_slack_ns = f_[5].load(std::memory_order_relaxed);
      out.max_wait_ns = f_[6].load(std::memory_order_relaxed);
      if (yields != nullptr) ReadYields(*yields);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) == s1) {
        if (publication != nullptr) *publication = s1;
        return valid != 0;
      }
    }
    return false;
  }

  void ReadYields(YieldSet& yields) const noexcept {
    yields.epoch_ns = y_[0].load(std::memory_order_relaxed);
    yields.need_ns = y_[1].load(std::memory_order_relaxed);
    yields.max_wait_ns = y_[2].load(std::memory_order_relaxed);
    yields.tolerance_ns = y_[3].load(std::memory_order_relaxed);
    yields.allowance_ns = y_[4].load(std::memory_order_relaxed);
    const auto n = static_cast<uint32_t>(y_[kYieldCount].load(std::memory_order_relaxed));
    yields.count = n < kMaxYieldWindows ? n : kMaxYieldWindows;
    for (uint32_t i = 0; i < yields.count; ++i) {
      YieldWindow& w = yields.windows[i];
      const std::atomic<int64_t>* f = &y_[kYieldHeader + kWindowFields * i];
      w.period_ns = f[0].load(std::memory_order_relaxed);
      w.offset_ns = f[1].load(std::memory_order_relaxed);
      w.window_ns = f[2].load(std::memory_order_relaxed);
      w.inv_period = std::bit_cast<double>(f[3].load(std::memory_order_relaxed));
    }
  }

  std::atomic<uint32_t> seq_{0};
  std::atomic<int> valid_{0};
  std::atomic<int64_t> f_[7] = {};
  // epoch, need, max wait, tolerance, allowance, count
  static constexpr uint32_t kYieldCount = 5;
  static constexpr uint32_t kYieldHeader = kYieldCount + 1;
  static constexpr uint32_t kWindowFields = 4;  // period, offset, window, 1 / period (bits)
  std::atomic<int64_t> y_[kYieldHeader + kWindowFields * kMaxYieldWindows] = {};
};

}  // namespace metronome::shim
