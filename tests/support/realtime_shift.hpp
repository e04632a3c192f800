// A step of the wall clock, as NTP makes one, for a test program: its clock_gettime adds
// `realtime_shift_ns` to CLOCK_REALTIME while a test sets it (0 otherwise; the monotonic clocks
// are left alone, as a real step leaves them). Include it in one source of the program: it
// defines the program's clock_gettime, which the code under test (linked in) then calls.
#pragma once

#include <dlfcn.h>
#include <time.h>

#include <atomic>
#include <cstdint>

inline std::atomic<int64_t> realtime_shift_ns{0};

extern "C" int clock_gettime(clockid_t clock, timespec* ts) noexcept {
  using ClockGettime = int (*)(clockid_t, timespec*);
  static const auto kReal = reinterpret_cast<ClockGettime>(dlsym(RTLD_NEXT, "clock_gettime"));
  const int r = kReal(clock, ts);
  const int64_t shift = realtime_shift_ns.load(std::memory_order_relaxed);
  if (r == 0 && clock == CLOCK_REALTIME && shift != 0) {
    const int64_t t = static_cast<int64_t>(ts->tv_sec) * 1'000'000'000 + ts->tv_nsec + shift;
    ts->tv_sec = static_cast<time_t>(t / 1'000'000'000);
    ts->tv_nsec = static_cast<long>(t % 1'000'000'000);
  }
  return r;
}
