// TimetableStore: the timetable in force for one job, written by the background thread and read
// by the gate on the caller's path without a lock (a sequence lock: the writer makes the sequence
// odd while it writes; a reader retries when it saw an odd or changed sequence). A new version
// replaces the old one atomically as far as any reader can tell.
#pragma once

#include <atomic>
#include <cstdint>

#include "metronome/common/timetable.hpp"

namespace metronome::shim {

class TimetableStore {
 public:
  // Single writer.
  void Publish(const Timetable& t) noexcept {
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
    valid_.store(1, std::memory_order_relaxed);
    seq_.store(s + 2, std::memory_order_release);
  }

  // Single writer: no timetable (the gate lets everything through).
  void Clear() noexcept {
    const uint32_t s = seq_.load(std::memory_order_relaxed);
    seq_.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    valid_.store(0, std::memory_order_relaxed);
    seq_.store(s + 2, std::memory_order_release);
  }

  // Any number of readers. False when there is no timetable, or when a writer kept it busy for
  // all the retries (then the caller goes ungated, which is always safe).
  bool Read(Timetable& out) const noexcept {
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
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) == s1) return valid != 0;
    }
    return false;
  }

  uint64_t Version() const noexcept {
    Timetable t;
    return Read(t) ? t.version : 0;
  }

 private:
  std::atomic<uint32_t> seq_{0};
  std::atomic<int> valid_{0};
  std::atomic<int64_t> f_[7] = {};
};

}  // namespace metronome::shim
