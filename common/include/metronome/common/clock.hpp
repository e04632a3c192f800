// The clock all timetables and reports use: CLOCK_REALTIME in nanoseconds. Every host reads its
// own; the residual skew between a shim's host and the scheduler is estimated by ClockSync
// (clock_sync.hpp), so an NTP step on one host is absorbed at the next ping.
#pragma once

#include <cstdint>
#include <ctime>

namespace metronome {

// Durations in the clock's unit.
inline constexpr int64_t kUs = 1'000;
inline constexpr int64_t kMs = 1'000'000;

inline int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// For lengths of time that a step of CLOCK_REALTIME must not stretch or cut (bounded waits).
inline int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace metronome
